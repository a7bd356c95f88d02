"""Hold files: another live process's reservation counts, a killed process's counts for nothing; the
board's lock keeps out every other process, from a hold file's creation on."""

from __future__ import annotations

import contextlib
import fcntl
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from giant_assets.runs.holds import HoldBoard

CHILD = """
import sys, time
from pathlib import Path
from giant_assets.runs.holds import HoldBoard
board = HoldBoard(Path(sys.argv[1]), "gtex")
board.hold(2.5)
print("held", flush=True)
time.sleep(60)
"""


def test_a_live_process_hold_counts_and_a_killed_one_is_dropped(tmp_path: Path) -> None:
    mine = HoldBoard(tmp_path, "tcga")
    mine.hold(1.0)
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == b"held"
        assert mine.others() == (2.5, 1)  # not counting its own 1.0
        mine.hold(0.25)
        third = HoldBoard(tmp_path, "panda")
        assert third.others() == (2.75, 2)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    time.sleep(0.05)
    assert mine.others() == (0.0, 0)
    # the killed process's file is gone; the third board (alive, holding nothing) is still there
    names = sorted(p.name.split(".")[0] for p in (tmp_path / "holds").glob("*.hold"))
    assert names == ["panda", "tcga"]
    third.close()
    mine.close()
    assert not (tmp_path / "holds" / mine.path.name).exists()


PROBE = """
import fcntl, sys
with open(sys.argv[1], "a") as fh:
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("taken")
    else:
        print("free")
"""


def probe(lock: Path) -> str:
    """What another process finds when it tries to take ``lock`` without waiting."""
    out = subprocess.run([sys.executable, "-c", PROBE, str(lock)], capture_output=True, text=True, timeout=60)
    return out.stdout.strip()


def test_inside_locked_no_other_process_can_take_the_board_lock(tmp_path: Path) -> None:
    """Mutation: ``locked()`` without its ``flock`` of ``holds/.lock`` (re-entrant depth only)."""
    board = HoldBoard(tmp_path, "tcga")
    lock = tmp_path / "holds" / ".lock"
    with board.locked():
        assert probe(lock) == "taken"
        with board.locked():  # re-entrant: still held after the inner exit
            pass
        assert probe(lock) == "taken"
    assert probe(lock) == "free"
    board.close()


RIVAL = """
import sys
from pathlib import Path
from giant_assets.runs.holds import HoldBoard
print("ready", flush=True)
sys.stdin.readline()
board = HoldBoard(Path(sys.argv[1]), "rival")
print(*board.others(), flush=True)
sys.stdin.readline()
print(*board.others(), flush=True)
sys.stdin.readline()
"""


def test_a_hold_file_is_never_seen_unlocked_by_another_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another cell's board reads the holds right after this board created its file and before it
    locked it (forced: a hook on ``flock`` lets the rival run, and waits up to 3 s for it). Mutation:
    the hold file created and locked outside ``holds/.lock`` (the rival removes it as a dead process's:
    a reservation nobody sees)."""
    rival = subprocess.Popen(
        [sys.executable, "-c", RIVAL, str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    lines: queue.Queue[str] = queue.Queue()
    assert rival.stdout is not None and rival.stdin is not None
    threading.Thread(target=lambda: [lines.put(line.strip()) for line in rival.stdout], daemon=True).start()
    real, fired = fcntl.flock, []

    def flock(fh, op: int) -> None:
        if not fired and str(getattr(fh, "name", "")).endswith(".hold") and op & fcntl.LOCK_EX:
            fired.append(True)
            rival.stdin.write("go\n")
            rival.stdin.flush()
            with contextlib.suppress(queue.Empty):  # the rival reads every hold now, unless kept waiting
                fired.append(lines.get(timeout=3))
        real(fh, op)

    try:
        assert lines.get(timeout=60) == "ready"
        monkeypatch.setattr(fcntl, "flock", flock)
        mine = HoldBoard(tmp_path, "tcga")
        monkeypatch.setattr(fcntl, "flock", real)
        assert fired[0] is True
        assert mine.path.exists(), "another cell removed a live hold file as dead"
        if len(fired) == 1:  # it waited for the board lock: its first look comes now
            assert lines.get(timeout=60) == "0.0 0"
        mine.hold(0.4)
        rival.stdin.write("again\n")
        rival.stdin.flush()
        assert lines.get(timeout=60) == "0.4 1"  # the reservation is seen
        mine.close()
    finally:
        rival.kill()
        rival.wait(10)
