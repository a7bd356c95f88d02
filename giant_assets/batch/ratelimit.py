"""Request and token rate limits for model calls, acquired once per HTTP attempt.

``RateLimiter`` is the contract the providers use: ``await acquire()`` before every attempt (one
request), ``await record_tokens(n)`` after a reply (the tokens it used, for a tokens-per-minute cap).
``LocalRateLimiter`` enforces both inside one process; a limiter shared across processes and machines
implements the same two coroutines over a shared store.
"""

from __future__ import annotations

from typing import Protocol

from aiolimiter import AsyncLimiter


class RateLimiter(Protocol):
    """Admits requests (and accounts tokens) within per-minute limits."""

    async def acquire(self) -> None: ...

    async def record_tokens(self, n: int) -> None: ...


class LocalRateLimiter:
    """In-process limits: ``requests_per_minute`` and optionally ``tokens_per_minute`` (leaky buckets)."""

    def __init__(self, requests_per_minute: float, tokens_per_minute: float | None = None) -> None:
        self.requests = AsyncLimiter(requests_per_minute, 60)
        self.tokens = AsyncLimiter(tokens_per_minute, 60) if tokens_per_minute else None

    async def acquire(self) -> None:
        await self.requests.acquire()

    async def record_tokens(self, n: int) -> None:
        """Charge ``n`` tokens; waits while the last minute's tokens exceed the cap."""
        if self.tokens is None or n <= 0:
            return
        cap = self.tokens.max_rate
        while n > 0:  # aiolimiter refuses a single acquire above its capacity: charge in slices
            part = min(n, cap)
            await self.tokens.acquire(part)
            n -= part
