"""Request and token rate limits for model calls, acquired once per HTTP attempt.

``RateLimiter`` is the contract the providers use: ``await acquire()`` before every attempt (one
request), ``await record_tokens(n)`` after a reply (the tokens it used, for a tokens-per-minute cap).
``LocalRateLimiter`` enforces both inside one process; ``MachineRateLimiter`` (the default) across
the processes of one machine through small locked files under the data directory, so four cells at
once send 60 requests a minute to a key limited to 60, not 4 x 60; ``SharedRateLimiter`` across
processes and machines through Redis. ``make_rate_limiter`` picks one by configuration.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import math
import os
import random
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from aiolimiter import AsyncLimiter

from giant_assets.core.settings import (
    RATE_LIMIT_DIR_ENV,
    RATE_LIMIT_REDIS_URL_ENV,
    RATE_LIMIT_SCOPE_ENV,
    RATE_LIMIT_WINDOW_ENV,
    data_dir,
    env,
)

if TYPE_CHECKING:
    from limits import RateLimitItem
    from limits.aio.strategies import MovingWindowRateLimiter, SlidingWindowCounterRateLimiter

# redis and limits are imported inside the shared limiter's methods: every provider (and so the Dagster
# definitions) imports this module, and only runs with GIANT_RATE_LIMIT_REDIS_URL set use them.


class RateLimiter(Protocol):
    """Admits requests (and accounts tokens) within per-minute limits."""

    async def acquire(self) -> None: ...

    async def record_tokens(self, n: int) -> None: ...


class LocalRateLimiter:
    """In-process limits: ``requests_per_minute`` and optionally ``tokens_per_minute`` (leaky buckets)."""

    def __init__(self, requests_per_minute: float, tokens_per_minute: float | None = None) -> None:
        self.requests = _bucket(requests_per_minute)
        self.tokens = _bucket(tokens_per_minute) if tokens_per_minute else None

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


def _bucket(per_minute: float) -> AsyncLimiter:
    """A leaky bucket admitting ``per_minute`` a minute. Below 1 a minute, one per ``60 / per_minute`` s:
    aiolimiter refuses an acquire above its capacity, so a capacity under 1 could never admit a request."""
    if not per_minute > 0 or math.isinf(per_minute):
        raise ValueError(f"a rate limit must be a positive finite number per minute, got {per_minute!r}")
    if per_minute < 1:
        return AsyncLimiter(1, 60 / per_minute)
    return AsyncLimiter(per_minute, 60)


class FileBucket:
    """A token bucket in one file, shared by every process that opens the same path (GCRA: the file
    holds the time the bucket is next empty). Holds ``capacity`` (a minute's worth, at least 1, as the
    in-process limiter) and refills ``per_minute / 60`` a second: in any span of ``s`` seconds it admits
    at most ``capacity + s * per_minute / 60``. Each take reads and writes the file under an exclusive
    ``flock`` held for microseconds."""

    def __init__(self, path: Path, per_minute: float) -> None:
        if not per_minute > 0 or math.isinf(per_minute):
            raise ValueError(f"a rate limit must be a positive finite number per minute, got {per_minute!r}")
        self.path = path
        self.interval = 60.0 / per_minute  # seconds one unit takes to refill
        self.capacity = max(1.0, per_minute)
        self.depth = self.capacity * self.interval

    def try_take(self, cost: float = 1.0) -> float:
        """Take ``cost`` units now and return 0.0, or take nothing and return the seconds until they fit."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            raw = os.pread(fd, 64, 0)
            now = time.time()
            try:
                empty_at = max(float(raw), now) if raw else now
            except ValueError:  # a torn or foreign file: start full
                empty_at = now
            after = empty_at + cost * self.interval
            if after - now > self.depth:
                return after - now - self.depth
            data = repr(after).encode()
            os.pwrite(fd, data.ljust(64), 0)
            return 0.0
        finally:
            os.close(fd)

    async def take(self, cost: float = 1.0) -> None:
        """Wait until ``cost`` units fit, then take them (the jitter spreads waiting processes)."""
        while wait := self.try_take(cost):
            await asyncio.sleep(wait + random.uniform(0, 0.01))


class MachineRateLimiter:
    """Limits shared by the processes of one machine that use the same ``state_dir`` and ``key``
    (provider, model, key variable name): one FileBucket each for requests and tokens. Processes that
    configure different rates for one key share one bucket; each waits by its own rate."""

    def __init__(
        self,
        state_dir: Path,
        key: tuple[str, ...],
        requests_per_minute: float,
        tokens_per_minute: float | None = None,
    ) -> None:
        try:
            state_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ValueError(
                f"rate-limit state directory {state_dir} cannot be created ({exc.strerror}); set "
                f"{RATE_LIMIT_SCOPE_ENV}=process for a limit per process"
            ) from None
        name = _file_name(key)
        self.requests = FileBucket(state_dir / f"{name}.requests", requests_per_minute)
        self.tokens = (
            FileBucket(state_dir / f"{name}.tokens", tokens_per_minute) if tokens_per_minute else None
        )

    async def acquire(self) -> None:
        await self.requests.take(1)

    async def try_acquire(self) -> bool:
        """Admit one request now if the bucket has one (True), else admit nothing (False)."""
        return self.requests.try_take(1) == 0.0

    async def record_tokens(self, n: int) -> None:
        """Charge ``n`` tokens; waits while the bucket is short of them (in slices of its capacity)."""
        if self.tokens is None or n <= 0:
            return
        while n > 0:
            part = min(n, self.tokens.capacity)
            await self.tokens.take(part)
            n -= part


def _file_name(key: tuple[str, ...]) -> str:
    """A readable, safe file name for a limit's key (a digest keeps distinct keys apart)."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", "-".join(part or "-" for part in key))[:80]
    return f"{readable}-{hashlib.sha256(repr(key).encode()).hexdigest()[:12]}"


NAMESPACE = "giant"  # first part of every Redis key of the shared limits


class RateLimitStoreDown(RuntimeError):
    """The shared limit's store is configured but unreachable: calls stop instead of going unthrottled."""


class SharedRateLimiter:
    """Limits shared by every process and machine that uses the same Redis and the same ``key``.

    Requests: an exact moving window (one Redis list entry per request, at most the limit). Tokens: a
    sliding-window counter (two counters, so millions of tokens per minute cost nothing); the request
    window is 1/12 longer than the nominal one, a guard for the time between admission and arrival
    (``_per_window``). Both come from the ``limits`` library over redis-py; clocks of the machines should
    agree (NTP), since entries carry the caller's time. The window length is part of the Redis key, and
    so is the limit's value: runs meant to share a provider's limit must configure the same
    ``requests_per_minute``.
    """

    def __init__(
        self,
        redis_url: str,
        key: tuple[str, ...],
        requests_per_minute: float,
        tokens_per_minute: float | None = None,
        window_s: int = 60,
    ) -> None:
        self.url = redis_url
        self.key = tuple(part or "-" for part in key)  # e.g. (provider, model, key variable name)
        self.window_s = window_s
        self.requests = _per_window(requests_per_minute, window_s)
        self.tokens = _per_window(tokens_per_minute, window_s, guard=False) if tokens_per_minute else None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._strategies: tuple[MovingWindowRateLimiter, SlidingWindowCounterRateLimiter] | None = None

    def check(self) -> None:
        """Fail now, with a clear message, when the store does not answer."""
        import redis

        try:
            with redis.Redis.from_url(self.url, socket_connect_timeout=2, socket_timeout=2) as client:
                client.ping()
        except redis.RedisError as exc:
            raise self._down(exc) from exc

    async def acquire(self) -> None:
        moving, _ = self._for_this_loop()
        await self._take(moving, self.requests, 1)

    async def try_acquire(self) -> bool:
        """Admit one request now if the window has room (True), else admit nothing (False)."""
        import redis
        from limits.errors import StorageError

        moving, _ = self._for_this_loop()
        try:
            return bool(await moving.hit(self.requests, NAMESPACE, *self.key))
        except (StorageError, redis.RedisError, OSError) as exc:
            raise self._down(exc) from exc

    async def record_tokens(self, n: int) -> None:
        """Charge ``n`` tokens; waits while the window's tokens would exceed the cap."""
        if self.tokens is None or n <= 0:
            return
        _, counter = self._for_this_loop()
        while n > 0:  # a charge above the cap could never fit: charge it in slices
            part = min(n, self.tokens.amount)
            await self._take(counter, self.tokens, part)
            n -= part

    async def _take(self, strategy: Any, item: RateLimitItem, cost: int) -> None:
        import redis
        from limits.errors import StorageError

        while True:
            try:
                if await strategy.hit(item, NAMESPACE, *self.key, cost=cost):
                    return
                stats = await strategy.get_window_stats(item, NAMESPACE, *self.key)
            except (StorageError, redis.RedisError, OSError) as exc:
                raise self._down(exc) from exc
            # wake when the oldest entry leaves the window; the jitter spreads waiting processes
            await asyncio.sleep(max(stats.reset_time - time.time(), 0.01) + random.uniform(0, 0.05))

    def _for_this_loop(self) -> tuple[MovingWindowRateLimiter, SlidingWindowCounterRateLimiter]:
        """The async Redis client belongs to one event loop: make it (again) in the running one."""
        loop = asyncio.get_running_loop()
        if self._strategies is None or self._loop is not loop:
            from limits.aio.storage import RedisStorage
            from limits.aio.strategies import MovingWindowRateLimiter, SlidingWindowCounterRateLimiter

            storage = RedisStorage(
                "async+" + self.url,
                implementation="redispy",
                wrap_exceptions=True,
                socket_connect_timeout=2,
                socket_timeout=5,
            )
            self._loop = loop
            self._strategies = (MovingWindowRateLimiter(storage), SlidingWindowCounterRateLimiter(storage))
        return self._strategies

    def _down(self, exc: BaseException) -> RateLimitStoreDown:
        return RateLimitStoreDown(
            f"shared rate-limit store {_redact(self.url)} ({RATE_LIMIT_REDIS_URL_ENV}) is unreachable "
            f"({type(exc).__name__}: {exc}); refusing to call {'/'.join(self.key)} without the shared "
            f"limit. Start the store, or unset {RATE_LIMIT_REDIS_URL_ENV} to use the in-process limiter."
        )


def make_rate_limiter(
    provider: str,
    model: str,
    key_env: str,
    requests_per_minute: float,
    tokens_per_minute: float | None = None,
    state_dir: Path | None = None,
) -> RateLimiter:
    """The limiter for one (provider, model, key variable name): shared through Redis when
    ``GIANT_RATE_LIMIT_REDIS_URL`` is set (and reachable, else ``RateLimitStoreDown``); else shared by
    this machine's processes through files in ``state_dir`` (default ``GIANT_RATE_LIMIT_DIR``, else
    ``<data dir>/ratelimits``); with
    ``GIANT_RATE_LIMIT_SCOPE=process``, in-process.
    """
    url = env(RATE_LIMIT_REDIS_URL_ENV).strip()
    if not url:
        scope = env(RATE_LIMIT_SCOPE_ENV, "machine").strip() or "machine"
        if scope == "process":
            return LocalRateLimiter(requests_per_minute, tokens_per_minute)
        if scope != "machine":
            raise ValueError(f"{RATE_LIMIT_SCOPE_ENV}={scope!r}: expected machine or process")
        return MachineRateLimiter(
            state_dir or Path(env(RATE_LIMIT_DIR_ENV) or data_dir() / "ratelimits"),
            (provider, model, key_env),
            requests_per_minute,
            tokens_per_minute,
        )
    window = env(RATE_LIMIT_WINDOW_ENV, "60")
    try:
        window_s = int(window)
        if window_s < 1:
            raise ValueError
    except ValueError:
        raise ValueError(
            f"{RATE_LIMIT_WINDOW_ENV}={window!r}: expected a whole number of seconds >= 1"
        ) from None
    limiter = SharedRateLimiter(
        url, (provider, model, key_env), requests_per_minute, tokens_per_minute, window_s
    )
    limiter.check()
    return limiter


def _per_window(per_minute: float, window_s: int, guard: bool = True) -> RateLimitItem:
    """``per_minute`` scaled to a ``window_s``-second window (at least 1), counted over the window plus
    a guard of 1/12 of it (5 s of 60): a request reaches the provider some time after its admission,
    and a busy client delays some more than others, which would crowd more than the limit into one of
    the provider's windows (seen: 128 in 60 s at the server for 120 admitted per 60 s, on a loaded box).
    Below one per window, one per ``60 / per_minute`` seconds (rounded up: never faster than asked).
    """
    from limits import RateLimitItemPerSecond

    amount = math.floor(per_minute * window_s / 60)
    if amount < 1:
        amount, window_s = 1, max(window_s, math.ceil(60 / per_minute))
    return RateLimitItemPerSecond(amount, window_s + (math.ceil(window_s / 12) if guard else 0))


def _redact(url: str) -> str:
    """The URL without its password."""
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url
