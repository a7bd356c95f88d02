"""Price table: hand-computed costs, snapshot-name lookup, unknown models, overrides from dicts and files."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import pytest

from giant_assets.agents.pricing import DEFAULT_PRICES, ModelPrice, load_price_table
from giant_assets.core.money import usd_text


def test_default_cost_hand_computed() -> None:
    table = load_price_table()
    cost = table.cost("gpt-5", 1000, 500)  # 1000 * 1.25 / 1e6 + 500 * 10 / 1e6
    assert cost.usd == pytest.approx(0.00125 + 0.005) and cost.priced and cost.price_key == "gpt-5"
    assert all(p.is_default for p in DEFAULT_PRICES.values())


@pytest.mark.parametrize(
    ("model", "key"),
    [
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),  # the longest matching entry wins
        ("gpt-5-mini-2025-08-07", "gpt-5-mini"),
        ("gpt-5", "gpt-5"),
        ("gpt-50", None),  # a prefix must end at a '-' boundary
        ("llava-13b", None),
    ],
)
def test_lookup_by_snapshot_name(model: str, key: str | None) -> None:
    found = load_price_table().lookup(model)
    assert (found[0] if found else None) == key


def test_unknown_model_costs_unknown_with_flag(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    table = load_price_table()
    first, second = table.cost("my-local-vlm", 10_000, 1000), table.cost("my-local-vlm", 5, 5)
    assert math.isnan(first.usd) and (first.priced, second.priced) == (False, False)  # never $0
    assert caplog.text.count("no price for model 'my-local-vlm'") == 1  # warned once


def test_overrides_from_dict_json_and_yaml(tmp_path: Path) -> None:
    overrides = {"gpt-5": {"input_per_mtok": 2, "output_per_mtok": 20}, "mine": ModelPrice(1, 1)}
    table = load_price_table(overrides)
    assert table.cost("gpt-5", 1_000_000, 1_000_000).usd == pytest.approx(22.0)
    assert not table.prices["gpt-5"].is_default and table.cost("mine", 500_000, 0).usd == pytest.approx(0.5)
    assert table.prices["gpt-4o"].is_default  # untouched defaults stay
    js = tmp_path / "prices.json"
    js.write_text(json.dumps({"qwen2-vl": {"input_per_mtok": 0.1, "output_per_mtok": 0.3}}))
    assert load_price_table(js).cost("qwen2-vl", 2_000_000, 1_000_000).usd == pytest.approx(0.5)
    ym = tmp_path / "prices.yaml"
    ym.write_text("qwen2-vl:\n  input_per_mtok: 0.2\n  output_per_mtok: 0.4\n")
    assert load_price_table(str(ym)).cost("qwen2-vl", 1_000_000, 1_000_000).usd == pytest.approx(0.6)


def test_bad_overrides_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="model 'x': missing field 'output_per_mtok'"):
        load_price_table({"x": {"input_per_mtok": 1}})
    with pytest.raises(ValueError, match="'input_per_mtok' must be >= 0"):
        load_price_table({"x": {"input_per_mtok": -1, "output_per_mtok": 1}})
    with pytest.raises(ValueError, match="'output_per_mtok' must be a number, got 'cheap'"):
        load_price_table({"x": {"input_per_mtok": 1, "output_per_mtok": "cheap"}})
    with pytest.raises(FileNotFoundError, match="nope.yaml"):
        load_price_table(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="bad.json: not valid JSON"):
        load_price_table(bad)
    listy = tmp_path / "list.yaml"
    listy.write_text("- a\n- b\n")
    with pytest.raises(ValueError, match="list.yaml: expected a mapping"):
        load_price_table(listy)


def test_an_unknown_cost_is_shown_as_unknown_never_as_zero() -> None:
    assert usd_text(math.nan) == "unknown (no price)" and usd_text(0.5) == "$0.5000"
    assert usd_text(load_price_table().cost("my-local-vlm", 10, 10).usd, 6) == "unknown (no price)"
