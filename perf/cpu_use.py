"""How busy given processes kept the cores over a time window: /proc/<pid>/stat sampled in a thread."""

from __future__ import annotations

import bisect
import os
import threading
import time

_TICK = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) ``pid`` has used so far; 0.0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime (fields 14 and 15 of stat)


class CpuSampler:
    """Samples the summed CPU of ``pids`` every ``every_s`` (``time.monotonic`` stamps) until closed."""

    def __init__(self, pids: list[int], every_s: float = 0.05) -> None:
        self.pids = pids
        self.every_s = every_s
        self.times: list[float] = []
        self.cpu: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while True:
            self.times.append(time.monotonic())
            self.cpu.append(sum(process_cpu(pid) for pid in self.pids))
            if self._stop.wait(self.every_s):
                return

    def busy(self, start: float, end: float, cores: int) -> float:
        """Share of ``cores`` the processes used between ``start`` and ``end`` (nearest samples)."""
        i = min(bisect.bisect_left(self.times, start), len(self.times) - 1)
        j = min(bisect.bisect_left(self.times, end), len(self.times) - 1)
        if j <= i:
            return float("nan")
        return (self.cpu[j] - self.cpu[i]) / ((self.times[j] - self.times[i]) * cores)
