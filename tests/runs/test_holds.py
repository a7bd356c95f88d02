"""Hold files: another live process's reservation counts, a killed process's counts for nothing."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

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
