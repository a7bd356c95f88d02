"""The estimate's output-token bounds by hand: low = (visible low + reasoning low) x the fewest calls,
high = (visible high + reasoning high) x the most calls (visible text 80-250 tokens per reply)."""

from __future__ import annotations

import pytest

from giant_assets.agents.estimate import estimate
from giant_assets.agents.pricing import ModelPrice, PriceTable, load_price_table
from giant_assets.experiments.spec import Experiment

PRICES = load_price_table()


def test_output_bounds_pair_low_with_low_and_high_with_high() -> None:
    """gpt-5 at reasoning effort low (100-800 hidden tokens a call), 8 steps: 4-8 calls a run, 10 runs.
    Mutation: the low bound taken at the high per-call output."""
    exp = Experiment(
        name="g", agent="giant", provider="openai", model="gpt-5", max_steps=8, reasoning_effort="low"
    )
    e = estimate(exp, "tcga", items=10, prices=PRICES)
    assert (e.calls.low, e.calls.high) == (40, 80)
    assert (e.output_tokens.low, e.output_tokens.high) == ((80 + 100) * 40, (250 + 800) * 80)


def test_a_thinking_budget_bounds_the_output_from_30_percent_to_all_of_it() -> None:
    """Claude with a 2,000-token thinking budget: 600-2,000 thinking tokens a call. Mutation: the low
    bound at the whole budget."""
    exp = Experiment(name="c", agent="thumbnail", provider="anthropic", model="claude-sonnet-4-5",
                     thinking_budget=2000)  # fmt: skip
    e = estimate(exp, "tcga", items=10, prices=PRICES)
    assert (e.calls.low, e.calls.high) == (10, 10)
    assert (e.output_tokens.low, e.output_tokens.high) == ((80 + 600) * 10, (250 + 2000) * 10)


def test_each_usd_bound_prices_its_own_token_counts() -> None:
    """Prices of $1.25 input, $0.125 cached, $10 output per 1M tokens applied to the low counts for
    the low bound and to the high counts for the high bound. Mutation: the high bound priced with the
    low bound's cached tokens."""
    exp = Experiment(
        name="g", agent="giant", provider="openai", model="gpt-5", max_steps=8, reasoning_effort="low"
    )
    e = estimate(exp, "tcga", items=10, prices=PriceTable({"gpt-5": ModelPrice(1.25, 10.0, False, 0.125)}))
    for usd, n_in, cached, out in (
        (e.usd.low, e.input_tokens.low, e.cached_tokens.low, e.output_tokens.low),
        (e.usd.high, e.input_tokens.high, e.cached_tokens.high, e.output_tokens.high),
    ):
        n_in, cached = int(n_in), int(cached)
        assert 0 < cached < n_in
        assert usd == pytest.approx(((n_in - cached) * 1.25 + cached * 0.125 + int(out) * 10) / 1e6)
