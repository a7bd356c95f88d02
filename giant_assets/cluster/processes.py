"""The cluster's long-lived processes on one machine, started in their own process groups and stopped by
process id: Celery workers, the Dagster daemon. Each writes its log under ``log_dir``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

CODE_LOCATION = "giant_assets.cluster.definitions"
BIN = Path(sys.executable).parent


def worker_command(name: str) -> list[str]:
    """One Celery worker named ``name@<host>``, one step at a time (a step runs its own item concurrency)."""
    return [str(BIN / "celery"), "-A", "giant_assets.cluster.celery_app", "worker", "-n", f"{name}@%h",
            "--pool", "solo", "-Q", "dagster", "--prefetch-multiplier", "1", "--without-gossip",
            "--without-mingle", "--loglevel", "INFO"]  # fmt: skip


def daemon_command() -> list[str]:
    return [str(BIN / "dagster-daemon"), "run", "-m", CODE_LOCATION]


def backfill_command(job: str, partitions: Sequence[str], tags: Mapping[str, str]) -> list[str]:
    """Queue one run per partition of ``job`` (the daemon starts them within the run-queue limits)."""
    return [str(BIN / "dagster"), "job", "backfill", "-m", CODE_LOCATION, "-j", job,
            "--partitions", ",".join(partitions), "--tags", json.dumps(dict(tags)), "--noprompt"]  # fmt: skip


class Processes:
    """Processes started here, each the leader of its own process group; a context manager."""

    def __init__(self, log_dir: Path, env: Mapping[str, str]) -> None:
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, **env}
        self.started: dict[str, subprocess.Popen] = {}

    def start(self, name: str, args: Sequence[str]) -> subprocess.Popen:
        with open(self.log_dir / f"{name}.log", "ab") as log:
            process = subprocess.Popen(
                list(args), stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
            )
        self.started[name] = process
        return process

    def run(self, name: str, args: Sequence[str], timeout_s: float = 300) -> str:
        """Run a command to its end; its output, or an error naming the command and its log."""
        result = subprocess.run(
            list(args), capture_output=True, text=True, env=self.env, timeout=timeout_s, check=False
        )
        (self.log_dir / f"{name}.log").write_text(result.stdout + result.stderr)
        if result.returncode:
            raise RuntimeError(f"{name} failed ({result.returncode}): {result.stderr.strip()[-2000:]}")
        return result.stdout

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Signal the whole process group that ``name`` leads (a worker and anything it started)."""
        process = self.started[name]
        if process.poll() is None:
            os.killpg(process.pid, sig)
        process.wait(30)

    def stop_all(self, timeout_s: float = 30.0) -> None:
        """SIGTERM every group started here, then SIGKILL what is still there after ``timeout_s``."""
        alive = [p for p in self.started.values() if p.poll() is None]
        for process in alive:
            _signal_group(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for process in alive:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(max(deadline - time.monotonic(), 0.1))
        for process in self.started.values():  # a group may outlive its leader (e.g. a run process)
            _signal_group(process.pid, signal.SIGKILL)
            if process.poll() is None:
                process.wait(10)

    def __enter__(self) -> Processes:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_all()


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)
