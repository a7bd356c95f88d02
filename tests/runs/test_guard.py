"""Guards around a batch, with real processes: one writer per journal, and no orphaned batch."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from giant_assets.runs import guard
from giant_assets.runs.guard import LOCK_POLL_S, ORPHAN_POLL_S, JournalBusy, journal_lock, lock_path
from tests.support.warm_start.server import warm_code

# A batch process: run_batch over N items with an agent that records every call in a file (the "model").
BATCH = r"""
import asyncio, json, os, sys
from pathlib import Path
from giant_assets.runs.agent_api import AgentAnswer, Step
from giant_assets.runs.journal import Journal
from giant_assets.runs.runner import BatchSettings, run_batch

journal_path, calls_path = Path(sys.argv[1]), Path(sys.argv[2])
n_items, delay = int(sys.argv[3]), float(sys.argv[4])

class CountingAgent:
    name, model = "counting", "m"
    async def answer(self, item, run_index):
        with open(calls_path, "a") as fh:
            fh.write(f"{os.getpid()} {item.benchmark_id}\n")
        await asyncio.sleep(delay)
        return AgentAnswer(text="1", steps=[Step(0, "answer", text="1", cost_usd=0.01)])
    async def aclose(self):
        pass

items = [
    {"benchmark_name": "tcga", "benchmark_id": str(i), "prompt": "q", "options": ["a", "b"],
     "truth_label": 1, "wsi_path": f"/slides/{i}.svs", "wsi_status": "ok"}
    for i in range(n_items)
]
print("started", os.getpid(), flush=True)
batch = run_batch(CountingAgent(), items, config_hash="h", journal=Journal(journal_path),
                  settings=BatchSettings(concurrency=2), log=lambda line: print(line, flush=True))
outcome = asyncio.run(batch)
print(json.dumps({"executed": outcome.executed, "reused": outcome.reused}), flush=True)
"""

# Holds a journal's lock until its stdin closes.
HOLDER = r"""
import asyncio, sys
from pathlib import Path
from giant_assets.runs.guard import journal_lock

async def main():
    async with journal_lock(Path(sys.argv[1]), wait_s=0):
        print("locked", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

asyncio.run(main())
"""

# Takes a journal's lock the raw way, labels it only after argv[2] seconds, holds it until stdin closes.
SLOW_LABELLER = r"""
import fcntl, json, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o666)
fcntl.flock(fd, fcntl.LOCK_EX)
print("locked", flush=True)
delay = float(sys.argv[2])
if delay >= 0:
    time.sleep(delay)
    os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": "h", "since": "then"}).encode(), 0)
sys.stdin.read()
"""

# A parent that starts a batch child, prints the child's pid, then waits to be killed.
PARENT = r"""
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], *sys.argv[2:6]],
                         stdout=open(sys.argv[6], "w"), stderr=subprocess.STDOUT)
print(child.pid, flush=True)
time.sleep(600)
"""


def _holder(journal: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(journal)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline() == "locked\n"
    return proc


def lock_attempts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the lock's non-blocking flock attempts (each a try, then a LOCK_POLL_S sleep)."""
    tries: list[int] = []

    class Counting:
        LOCK_EX, LOCK_NB, LOCK_UN = fcntl.LOCK_EX, fcntl.LOCK_NB, fcntl.LOCK_UN

        @staticmethod
        def flock(fd: int, op: int) -> None:
            if op & fcntl.LOCK_NB:
                tries.append(op)
            fcntl.flock(fd, op)

    monkeypatch.setattr(guard, "fcntl", Counting)
    return tries


def test_a_second_writer_fails_naming_the_holder(tmp_path, monkeypatch):
    journal = tmp_path / "journals" / "h" / "tcga.jsonl"
    holder = _holder(journal)
    tries = lock_attempts(monkeypatch)
    try:
        with pytest.raises(JournalBusy) as info:
            asyncio.run(_hold(journal, wait_s=0.6))
        # it waited (tried again after a poll) and gave up by the deadline: 0.6 s / 0.2 s polls + 1
        assert 2 <= len(tries) <= round(0.6 / LOCK_POLL_S) + 1
        message = str(info.value)
        assert f"pid {holder.pid} on host {socket.gethostname()} since 20" in message
        assert str(journal) in message and str(lock_path(journal)) in message
    finally:
        holder.stdin.close()
        holder.wait(10)


def test_a_second_writer_waits_logging_the_holder_then_proceeds(tmp_path, monkeypatch):
    journal = tmp_path / "tcga.jsonl"
    holder = _holder(journal)
    messages: list[str] = []
    tries = lock_attempts(monkeypatch)
    try:

        async def release_soon() -> None:
            while len(tries) < 3:  # released after the waiter has tried and waited twice
                await asyncio.sleep(0.01)
            holder.stdin.close()

        async def both() -> None:
            await asyncio.gather(release_soon(), _hold(journal, wait_s=20, log=messages.append))

        asyncio.run(both())
        assert len(tries) >= 4  # it tried until the holder let go, then took the lock
        assert len(messages) == 1 and f"being written by pid {holder.pid} on host" in messages[0]
    finally:
        holder.wait(10)


@pytest.mark.parametrize("label_after_s", [0.4, -1.0])
def test_a_holder_is_named_once_it_labels_the_lock(tmp_path, label_after_s):
    """Between taking the lock and writing its label a holder is unnamed: a waiter names it once it has
    labelled (within LABEL_GRACE_S), and says it is unlabelled only when it never does."""
    journal = tmp_path / "tcga.jsonl"
    holder = subprocess.Popen(
        [sys.executable, "-c", SLOW_LABELLER, str(lock_path(journal)), str(label_after_s)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout.readline() == "locked\n"
    messages: list[str] = []
    try:
        with pytest.raises(JournalBusy):
            asyncio.run(_hold(journal, wait_s=1.5, log=messages.append))
    finally:
        holder.stdin.close()
        holder.wait(10)
    assert len(messages) == 1
    if label_after_s >= 0:
        assert f"being written by pid {holder.pid} on host h since then" in messages[0]
    else:
        assert "being written by a process that has not labelled the lock yet" in messages[0]


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    journal = tmp_path / "tcga.jsonl"
    holder = _holder(journal)
    holder.kill()
    holder.wait(10)
    asyncio.run(_hold(journal, wait_s=0))  # acquired at once: the OS dropped the dead holder's lock
    assert json.loads(lock_path(journal).read_text() or "{}") == {}  # label cleared on release


async def _hold(journal: Path, wait_s: float, log=lambda line: None) -> None:
    async with journal_lock(journal, wait_s=wait_s, log=log):
        await asyncio.sleep(0)


def test_two_concurrent_runs_of_one_partition_never_ask_twice(tmp_path):
    journal, calls = tmp_path / "tcga.jsonl", tmp_path / "calls.txt"
    args = [str(journal), str(calls), "40", "0.02"]
    env = warm_code({**os.environ, "GIANT_JOURNAL_LOCK_WAIT_S": "60"})  # neither is killed: they may run warm
    runs = [
        subprocess.Popen([sys.executable, "-c", BATCH, *args], stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(2)
    ]
    outputs = [run.communicate(timeout=120)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    asked = calls.read_text().split("\n")[:-1]
    assert sorted(int(line.split()[1]) for line in asked) == list(range(40))  # each item asked once
    summaries = sorted(json.loads(out.strip().splitlines()[-1])["executed"] for out in outputs)
    assert summaries == [0, 40]  # the later run waited, then reused every row
    waited = next(out for out in outputs if '"executed": 0' in out)
    assert "is being written by pid" in waited


def _gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie no one reaps counts as exited)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "State:\tZ" in status


def test_an_orphaned_batch_stops_within_seconds_of_its_parent_being_killed(tmp_path):
    journal, calls, out = tmp_path / "tcga.jsonl", tmp_path / "calls.txt", tmp_path / "child.log"
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, BATCH, str(journal), str(calls), "10000", "0.05", str(out)],
        stdout=subprocess.PIPE,
        text=True,
    )
    child = int(parent.stdout.readline())
    try:
        deadline = time.monotonic() + 60
        while not (calls.exists() and len(calls.read_text().splitlines()) >= 6):
            assert time.monotonic() < deadline, out.read_text()
            time.sleep(0.1)
        os.kill(child, signal.SIGSTOP)  # no call starts between the count and the kill
        at_kill = len(calls.read_text().splitlines())
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        os.kill(child, signal.SIGCONT)
        while not _gone(child):  # a batch that never notices runs 10000 x 0.05 s: pytest-timeout fails it
            time.sleep(0.05)
        asked = len(calls.read_text().splitlines())
        # counted, not timed: between the kill and the watchdog's next look (every ORPHAN_POLL_S of the
        # batch's own loop) its 2 workers start at most one call per 0.05 s each, plus the round in flight
        assert asked - at_kill <= 2 * (ORPHAN_POLL_S / 0.05 + 2) and asked < 10000
        log = out.read_text()
        assert f"parent process {parent.pid} is gone" in log and "Orphaned" in log, log
    finally:
        if not _gone(child):
            os.kill(child, signal.SIGKILL)
