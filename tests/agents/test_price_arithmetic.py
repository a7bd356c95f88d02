"""``ModelPrice.usd`` and the batch price table by hand: every token class at its own rate, billed once."""

from __future__ import annotations

import math

import pytest

from giant_assets.agents.pricing import ModelPrice, PriceTable, load_price_table

# $ per 1M tokens: input 4, output 10, cached 1, cache write 5 (distinct, so a swapped term shows)
PRICE = ModelPrice(4.0, 10.0, False, 1.0, 5.0)


def test_cached_and_written_tokens_are_billed_apart_and_once() -> None:
    """3,000 input tokens of which 2,000 read from the cache and 700 written to it, 100 output.
    Mutations: cached or written tokens also billed at the input rate; the cache-write term dropped."""
    assert PRICE.usd(3000, 100, cached=2000, written=700) == pytest.approx(
        (300 * 4 + 2000 * 1 + 700 * 5 + 100 * 10) / 1e6
    )
    assert PRICE.usd(3000, 0) == pytest.approx(3000 * 4 / 1e6)


def test_cache_rates_default_to_the_input_rate() -> None:
    """No cached or cache-write price: those tokens cost what input costs. Mutation: either default 0."""
    assert ModelPrice(4.0, 10.0).usd(3000, 100, cached=2000, written=700) == pytest.approx(
        (3000 * 4 + 100 * 10) / 1e6
    )


def test_the_batch_table_halves_every_rate_and_keeps_absent_ones_absent() -> None:
    """Mutations: ``scaled`` leaving the output, cached or cache-write rate at full price."""
    half = PriceTable({"m": PRICE, "plain": ModelPrice(4.0, 10.0)}).scaled(0.5)
    p = half.prices["m"]
    assert (p.input_per_mtok, p.output_per_mtok, p.cached_input_per_mtok, p.cache_write_per_mtok) == (
        2.0, 5.0, 0.5, 2.5,
    )  # fmt: skip
    assert half.prices["plain"].cached_input_per_mtok is None
    assert half.cost("m", 3000, 100, 2000, 700).usd == pytest.approx(PRICE.usd(3000, 100, 2000, 700) / 2)


def test_a_nan_price_in_a_price_file_is_refused() -> None:
    """Mutation: the check ``not value >= 0`` written ``value < 0`` (NaN would pass and price every
    call at NaN without saying why)."""
    with pytest.raises(ValueError, match="'input_per_mtok' must be >= 0, got nan"):
        load_price_table({"x": {"input_per_mtok": math.nan, "output_per_mtok": 1}})
