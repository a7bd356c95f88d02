"""The shared limit holds across processes (counted at a loopback model server), and a configured but
unreachable store stops calls with a clear message instead of letting them run unthrottled."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from giant_assets.cluster.report import peak_in_window
from giant_assets.cluster.servers import LocalServer, free_port, start_redis
from giant_assets.core.settings import RATE_LIMIT_REDIS_URL_ENV as REDIS_URL_ENV
from giant_assets.core.settings import RATE_LIMIT_WINDOW_ENV as WINDOW_ENV
from giant_assets.runs.ratelimit import (
    MachineRateLimiter,
    RateLimitStoreDown,
    SharedRateLimiter,
    make_rate_limiter,
)

REPO = Path(__file__).resolve().parents[2]
WINDOW_S = 4
REQUESTS_PER_MINUTE = 150
PER_WINDOW = REQUESTS_PER_MINUTE * WINDOW_S // 60  # 10: the limit scaled to the window
PER_PROCESS = 12


def test_peak_in_window_counts_a_half_open_interval() -> None:
    assert peak_in_window([0.0, 0.5, 1.0, 1.9, 2.0, 2.1], 2.0) == 5  # 0.5 .. 2.1 (0.0 .. 2.0 is 2 s: 4)
    assert peak_in_window([0.0, 2.0, 4.0], 2.0) == 1
    assert peak_in_window([], 2.0) == 0


def test_two_processes_share_one_limit(redis_server: LocalServer) -> None:
    """Two processes, connected, then each tries PER_PROCESS requests at once: the shared window admits
    PER_WINDOW across both (two local limiters, the oracle, would admit PER_WINDOW each). Counted, not
    timed: a second window's admissions are allowed only if the tries spanned one."""
    env = os.environ | {REDIS_URL_ENV: f"{redis_server.url}/2", WINDOW_ENV: str(WINDOW_S)}
    clients = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.cluster.rate_client",
                "try",
                str(PER_PROCESS),
                str(REQUESTS_PER_MINUTE),
            ],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for _ in range(2)
    ]
    assert [c.stdout.readline() for c in clients] == ["ready\n"] * 2
    for c in clients:
        c.stdin.write("go\n")
        c.stdin.close()
    results = [c.stdout.readline().split() for c in clients]
    assert [c.wait(60) for c in clients] == [0, 0]
    admitted = sum(int(r[0]) for r in results)
    span = max(float(r[2]) for r in results) - min(float(r[1]) for r in results)
    assert PER_WINDOW <= admitted <= PER_WINDOW * (1 + int(span // WINDOW_S)) < 2 * PER_PROCESS


def test_without_a_store_the_limit_is_the_machines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REDIS_URL_ENV, raising=False)
    assert isinstance(make_rate_limiter("openai", "m", "OPENAI_API_KEY", 60), MachineRateLimiter)


def test_store_down_at_start_fails_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    dead = f"redis://127.0.0.1:{free_port()}/2"
    monkeypatch.setenv(REDIS_URL_ENV, dead)
    with pytest.raises(RateLimitStoreDown) as err:
        make_rate_limiter("openai", "gpt-x", "OPENAI_API_KEY", 60)
    message = str(err.value)
    assert dead in message and REDIS_URL_ENV in message and "openai/gpt-x/OPENAI_API_KEY" in message
    assert "unreachable" in message


def test_store_lost_mid_run_stops_calls(cluster_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = start_redis(cluster_root / "redis-lost")
    monkeypatch.setenv(REDIS_URL_ENV, server.url)
    monkeypatch.setenv(WINDOW_ENV, "1")
    limiter = make_rate_limiter("anthropic", "claude-x", "ANTHROPIC_API_KEY", 60, tokens_per_minute=600)
    assert isinstance(limiter, SharedRateLimiter)

    async def go() -> None:
        await limiter.acquire()
        await limiter.record_tokens(25)  # 25 > the 10-per-second cap: charged in slices over windows
        server.stop()
        await limiter.acquire()

    started = time.monotonic()
    with pytest.raises(RateLimitStoreDown, match="refusing to call anthropic/claude-x/ANTHROPIC_API_KEY"):
        asyncio.run(go())
    assert time.monotonic() - started >= 1.0  # the token slices did wait for the window


def test_bad_window_is_named(redis_server: LocalServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REDIS_URL_ENV, redis_server.url)
    monkeypatch.setenv(WINDOW_ENV, "0.5")
    with pytest.raises(ValueError, match=f"{WINDOW_ENV}='0.5'"):
        make_rate_limiter("openai", "m", "K", 60)
