"""The one retry policy of every provider: ours, not the SDK's (the SDKs get ``max_retries=0``).

Why ours: the shared rate limiter must admit every HTTP attempt (``await limiter.acquire()`` before
each one), which the SDKs' internal retry loops cannot do, and one loop keeps the behaviour identical
across wire formats. Retried: HTTP 408/409/425/429/5xx/529, timeouts and connection errors. A
positive ``Retry-After`` (or ``retry-after-ms``) is waited as given (+<=10% jitter against herds);
otherwise exponential backoff with jitter. The total wait is capped (``max_total_wait_s``).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

from giant_assets.agents.providers.errors import ProviderError, ProviderHTTPError, RetriesExhausted
from giant_assets.runs.ratelimit import RateLimiter

_LOG = logging.getLogger(__name__)
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3  # the SDKs' default (1 + 2 retries), as the official code has it
    base_delay_s: float = 1.0  # first backoff; doubles each attempt
    max_delay_s: float = 60.0  # cap of one computed backoff
    max_total_wait_s: float = 300.0  # give up rather than sleep more than this in total
    jitter: float = 0.5  # a backoff is scaled by uniform(1 - jitter, 1)

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """Wait after failed attempt ``attempt`` (1-based), without any server hint."""
        delay = min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1))
        return delay * (1 - self.jitter * rng.random())


@dataclass(frozen=True)
class Failure:
    """One failed attempt, as the wire module classified the SDK's exception (message redacted)."""

    message: str
    status: int | None = None
    retry_after_s: float | None = None

    @property
    def retryable(self) -> bool:
        return self.status is None or self.status in RETRYABLE_STATUS


def parse_retry_after(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms``, or ``Retry-After`` as seconds or HTTP date."""
    lowered = {k.lower(): v for k, v in headers.items()}
    if "retry-after-ms" in lowered:
        try:
            return max(0.0, float(lowered["retry-after-ms"]) / 1000)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


async def with_retries(
    call: Callable[[], Awaitable[T]],
    classify: Callable[[BaseException], Failure | ProviderError | None],
    *,
    where: str,
    policy: RetryPolicy,
    limiter: RateLimiter | None,
    rng: random.Random,
) -> tuple[T, int, float, float]:
    """Run ``call`` until it succeeds: returns (value, attempts, seconds waited, wall seconds).

    ``classify`` turns an exception into a Failure to retry or not, a ProviderError to raise at once
    (e.g. a malformed reply), or None (not a call failure: re-raised as is).
    Raises ProviderHTTPError for a non-retryable status, RetriesExhausted when the budget runs out.
    """
    start = time.monotonic()
    waited = 0.0
    last: Failure | None = None
    for attempt in range(1, policy.max_attempts + 1):
        if limiter is not None:
            await limiter.acquire()
        try:
            value = await call()
        except Exception as exc:
            failure = classify(exc)
            if failure is None:
                raise
            if isinstance(failure, ProviderError):
                failure.attempts = attempt
                raise failure from None
            last = failure
        else:
            return value, attempt, waited, time.monotonic() - start
        if not last.retryable:
            raise ProviderHTTPError(
                f"{where}: HTTP {last.status} (not retryable): {last.message}", last.status, attempt
            )
        if attempt == policy.max_attempts:
            break
        hint = last.retry_after_s
        wait = policy.backoff(attempt, rng) if not hint else hint * (1 + 0.1 * rng.random())
        if waited + wait > policy.max_total_wait_s:
            raise RetriesExhausted(
                f"{where}: giving up after {attempt} attempts: waiting {wait:.1f}s more would exceed the "
                f"{policy.max_total_wait_s:g}s retry budget; last error: {_describe(last)}",
                last.status,
                attempt,
            )
        _LOG.warning(
            "%s: %s; retry %d/%d in %.2fs", where, _describe(last), attempt + 1, policy.max_attempts, wait
        )
        await asyncio.sleep(wait)
        waited += wait
    assert last is not None
    raise RetriesExhausted(
        f"{where}: failed after {policy.max_attempts} attempts ({waited:.1f}s waiting); "
        f"last error: {_describe(last)}",
        last.status,
        policy.max_attempts,
    )


def _describe(failure: Failure) -> str:
    return failure.message if failure.status is None else f"HTTP {failure.status}: {failure.message}"
