"""Shared timing helper of the performance measurements."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def best_of(fn: Callable[[], T], repeats: int = 1) -> tuple[float, T]:
    """Best wall time over ``repeats`` calls of ``fn`` and the last result."""
    best, out = float("inf"), None
    for _ in range(max(1, repeats)):
        started = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - started)
    return best, out
