"""Any request rate the experiment check accepts works: a rate below one a minute admits one request per
``60 / rate`` seconds (it used to fail every run with aiolimiter's 'Amount must be a number between 0 and
the maximum capacity'); a rate the limiter cannot take is refused by the check, naming the field."""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path

import pytest

from giant_assets.agents.providers import Message, OpenAIChatModel, TextPart
from giant_assets.batch.ratelimit import LocalRateLimiter, _per_window, make_rate_limiter
from giant_assets.core.settings import RATE_LIMIT_REDIS_URL_ENV
from giant_assets.demo.scripted import Reply, ScriptedModelServer
from giant_assets.experiments.declared import ExperimentsFileError, load_experiments


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
