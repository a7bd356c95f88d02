"""Any request rate the experiment check accepts works: a rate below one a minute admits one request per
``60 / rate`` seconds (it used to fail every run with aiolimiter's 'Amount must be a number between 0 and
the maximum capacity'); a rate the limiter cannot take is refused by the check, naming the field."""

from __future__ import annotations

import asyncio
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from giant_assets.agents.providers import Message, OpenAIChatModel, TextPart
from giant_assets.core.settings import RATE_LIMIT_DIR_ENV, RATE_LIMIT_REDIS_URL_ENV, RATE_LIMIT_SCOPE_ENV
from giant_assets.demo.scripted import Reply, ScriptedModelServer
from giant_assets.experiments.declared import ExperimentsFileError, load_experiments
from giant_assets.runs.ratelimit import (
    FileBucket,
    LocalRateLimiter,
    MachineRateLimiter,
    _per_window,
    make_rate_limiter,
)


def test_half_a_request_a_minute_calls_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RATE_LIMIT_REDIS_URL_ENV, raising=False)
    limiter = make_rate_limiter("openai", "m-slow", "-", 0.5)
    with ScriptedModelServer([Reply("Final answer: 2")]) as srv:
        model = OpenAIChatModel("m-slow", base_url=srv.openai_base_url, limiter=limiter)

        async def go():
            try:
                return await model.complete([Message.user(TextPart("q"))])
            finally:
                await model.aclose()

        reply = asyncio.run(go())
    assert reply.text == "Final answer: 2" and len(srv.requests) == 1


def test_below_one_a_minute_the_second_request_waits_its_interval() -> None:
    limiter = LocalRateLimiter(0.5, tokens_per_minute=0.5)  # one request (and token) per 120 s

    async def go() -> tuple[float, bool]:
        start = time.monotonic()
        await limiter.acquire()
        first = time.monotonic() - start
        try:
            await asyncio.wait_for(limiter.acquire(), 0.3)
        except TimeoutError:
            return first, False
        return first, True

    first, second_admitted = asyncio.run(go())
    assert first < 0.1 and not second_admitted
    assert limiter.requests.max_rate == 1 and limiter.requests.time_period == pytest.approx(120)


@pytest.mark.parametrize(
    ("per_minute", "window_s", "amount", "period_s"),
    [(0.5, 60, 1, 120), (0.25, 4, 1, 240), (1.5, 60, 1, 60), (150, 4, 10, 4)],
)
def test_shared_limit_never_admits_faster_than_asked(
    per_minute: float, window_s: int, amount: int, period_s: int
) -> None:
    item = _per_window(per_minute, window_s)  # counted over the period plus a 1/12 guard
    assert (item.amount, item.get_expiry()) == (amount, period_s + math.ceil(period_s / 12))
    assert amount * 60 / period_s <= per_minute


@pytest.mark.parametrize(
    ("field", "value"),
    [("requests_per_minute", ".inf"), ("requests_per_minute", "0"), ("tokens_per_minute", ".nan")],
)
def test_a_rate_the_limiter_cannot_take_is_refused_naming_the_field(
    tmp_path: Path, field: str, value: str
) -> None:
    path = tmp_path / "experiments.yaml"
    path.write_text(f"experiments:\n  slow: {{agent: random, {field}: {value}}}\n")
    with pytest.raises(ExperimentsFileError, match=f"experiment 'slow': field '{field}'"):
        load_experiments(path)


# One process of the machine-wide limit test: waits for "go", then tries N requests at once on the
# default limiter (no Redis), printing how many it was admitted and the clock before and after.
TRIER = r"""
import sys, time
from giant_assets.runs.ratelimit import make_rate_limiter
limiter = make_rate_limiter("openai", "gpt-5", "OPENAI_API_KEY", float(sys.argv[1]))
print(type(limiter).__name__, flush=True)
sys.stdin.readline()
before = time.time()
admitted = sum(limiter.requests.try_take() == 0.0 for _ in range(int(sys.argv[2])))
print(admitted, before, time.time(), flush=True)
"""


def test_the_processes_of_one_machine_share_one_limit_per_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Four processes each try 20 requests against requests_per_minute 12: by default they share one
    bucket, so 12 (a minute's burst) plus what refills while they try are admitted in all, where a
    limiter per process (the old default) admits 12 to each, 48."""
    monkeypatch.delenv(RATE_LIMIT_REDIS_URL_ENV, raising=False)
    monkeypatch.delenv(RATE_LIMIT_SCOPE_ENV, raising=False)
    per_minute, tries = 12, 20
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", TRIER, str(per_minute), str(tries)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for _ in range(4)
    ]
    kinds = {p.stdout.readline().strip() for p in procs}  # all started: the bucket is still full
    assert kinds == {"MachineRateLimiter"}
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.close()
    results = [p.stdout.readline().split() for p in procs]
    assert [p.wait(60) for p in procs] == [0] * 4
    admitted = sum(int(r[0]) for r in results)
    span = max(float(r[2]) for r in results) - min(float(r[1]) for r in results)
    # counted: a full bucket of 12, plus one per 5 s of the span the tries took (no slack needed:
    # the span measured around the tries is at least the span the bucket saw)
    assert per_minute <= admitted <= per_minute + span * per_minute / 60
    files = list(Path(os.environ[RATE_LIMIT_DIR_ENV]).iterdir())
    assert [f.name.split("-")[0] for f in files] == ["openai"] and files[0].suffix == ".requests"


def test_the_machine_bucket_admits_a_minute_at_once_then_waits_by_the_rate(tmp_path: Path) -> None:
    bucket = FileBucket(tmp_path / "b", 0.5)  # one request per 120 s, a burst of 1
    assert bucket.try_take() == 0.0
    assert bucket.try_take() == pytest.approx(120, abs=1)  # the second waits its interval
    tokens = MachineRateLimiter(tmp_path, ("p", "m", "K"), 60, tokens_per_minute=1000)
    asyncio.run(tokens.record_tokens(1000))  # the minute's tokens at once
    assert tokens.tokens.try_take(1) == pytest.approx(0.06, abs=0.01)  # the 1001st waits 60 s / 1000
    assert tokens.tokens.path != bucket.path and tokens.requests.path.name.startswith("p-m-K-")
    with pytest.raises(ValueError, match="positive finite"):
        FileBucket(tmp_path / "c", math.inf)


def test_the_rate_limit_scope_is_machine_or_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RATE_LIMIT_REDIS_URL_ENV, raising=False)
    monkeypatch.setenv(RATE_LIMIT_SCOPE_ENV, "process")
    assert isinstance(make_rate_limiter("openai", "m", "K", 60), LocalRateLimiter)
    monkeypatch.setenv(RATE_LIMIT_SCOPE_ENV, "cluster")
    with pytest.raises(ValueError, match="GIANT_RATE_LIMIT_SCOPE='cluster': expected machine or process"):
        make_rate_limiter("openai", "m", "K", 60)
