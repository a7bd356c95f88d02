"""What the platform says about a plug-in before it spends: the estimate counts each model's declared
calls at that model's own price (unknown without a declaration, never a silent undercount), ``check``
refuses a second model in batch mode, and ``list``/``status``/``estimate`` of a plug-in whose module
cannot be found say so instead of raising."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from giant_assets.agents.estimate import estimate, render
from giant_assets.agents.pricing import experiment_prices
from giant_assets.core.storage import ParquetStore
from giant_assets.experiments.plugins import PluginError, declared_calls
from giant_assets.experiments.spec import Experiment
from giant_assets.platform import experiments_cli
from tests.support.dagster_env import write_experiments

REPO = Path(__file__).resolve().parents[2]
PACKAGES = Path(__file__).parent / "packages"
TWO = "two_model_agent:make_agent"
# USD per million tokens, chosen here: input free, so the cost is the output tokens alone (by hand)
PRICES = {
    "gpt-5-mini": {"input_per_mtok": 0.0, "output_per_mtok": 1.0},
    "gpt-5": {"input_per_mtok": 0.0, "output_per_mtok": 10.0},
}


@pytest.fixture(autouse=True)
def plugin_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.syspath_prepend(str(PACKAGES))
    monkeypatch.syspath_prepend(str(REPO / "examples"))
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    monkeypatch.setenv("GIANT_PRICES", str(prices))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)


def two_model(**fields) -> Experiment:
    settings = {"agent_options": {"answerer": "gpt-5", "regions": 2}, "reasoning_effort": "minimal"}
    return Experiment(name="two", agent=TWO, model="gpt-5-mini", **(settings | fields))


def test_each_model_is_priced_at_its_own_price() -> None:
    """3 runs; the proposer (gpt-5-mini) 1-2 calls a run, the answerer (gpt-5) 1: output tokens per call
    80-450 (80-250 visible + 0-200 reasoning at 'minimal'), at $1 and $10 per million."""
    exp = two_model()
    est = estimate(exp, "b", items=3, prices=experiment_prices(exp))
    assert (est.calls.low, est.calls.high) == (3 * 1 + 3 * 1, 3 * 2 + 3 * 1)
    low = (80 * 3 * 1.0 + 80 * 3 * 10.0) / 1e6
    high = (450 * 6 * 1.0 + 450 * 3 * 10.0) / 1e6
    assert (est.usd.low, est.usd.high) == (pytest.approx(low), pytest.approx(high))
    assert est.priced and est.batch_rounds == 2  # the proposer's calls: one batch round each
    assert math.isnan(est.usd_batch.low)  # batch mode cannot send the answerer
    assert any("batch mode cannot send gpt-5" in n for n in est.notes)
    # the same plug-in with the answerer equal to the proposer: 2-3 calls of gpt-5-mini at $1
    same = two_model(agent_options={"answerer": "gpt-5-mini", "regions": 2})
    one = estimate(same, "b", items=3, prices=experiment_prices(same))
    assert (one.usd.low, one.usd.high) == (pytest.approx(80 * 6 / 1e6), pytest.approx(450 * 9 / 1e6))
    assert one.usd_batch.high == pytest.approx(one.usd.high / 2)


def test_an_undeclared_plugin_has_unknown_calls_and_cost() -> None:
    exp = Experiment(name="lab", agent="lab_agent:make_agent", model="gpt-5")
    est = estimate(exp, "b", items=3, prices=experiment_prices(exp))
    for span in (est.calls, est.usd, est.usd_batch, est.hours):
        assert math.isnan(span.low) and math.isnan(span.high)
    assert not est.priced
    table = render([est])
    assert "unknown" in table and "declares no expected calls" in table


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("{model: float('nan')}", r"calls per run are a whole number 0..1000 or \[fewest, most\], not nan"),
        ("{model: [3, 1]}", r"not \[3, 1\]"),
        ("{model: 10**5000}", r"not \(a long integer\)"),
        ("{model: [1, 10**5000]}", "a list holding a long integer"),
        ("{model: True}", "not True"),
        ("{model: 1.5}", "not 1.5"),
        ("{model: -1}", "not -1"),
        ("{'': 1}", "a model name is a text of 1 to 200 characters"),
        ("{}", "must return a mapping of 1 to 16 model names"),
        ("[1, 2]", "must return a mapping"),
        ("1 / 0", "expected_calls raised ZeroDivisionError"),
    ],
)
def test_a_hostile_declaration_is_refused_and_the_estimate_says_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, message: str
) -> None:
    module = f"hostile_{abs(hash(body))}"
    (tmp_path / f"{module}.py").write_text(
        f"def make_agent(kit):\n    return None\n\n\ndef calls(options, model):\n    return {body}\n\n\n"
        "make_agent.expected_calls = calls\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(PluginError, match=message):
        declared_calls(f"{module}:make_agent", {}, "gpt-5")
    exp = Experiment(name="h", agent=f"{module}:make_agent", model="gpt-5")
    est = estimate(exp, "b", items=2, prices=experiment_prices(exp))
    assert math.isnan(est.usd.low) and any("unknown" in n for n in est.notes)


def test_check_refuses_a_second_model_in_batch_mode(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    settings = {"agent": TWO, "model": "gpt-5-mini", "agent_options": {"answerer": "gpt-5"}}
    path = write_experiments(tmp_path / "experiments.yaml", {"two": settings | {"batch": True}})
    assert experiments_cli.main(["--file", str(path), "check"]) == 1
    err = capsys.readouterr().err
    assert "declares calls to 'gpt-5' besides the experiment's model 'gpt-5-mini'" in err
    assert "without batch: true" in err


GONE = "lab_gone.agent:make_agent"


def test_list_status_and_estimate_of_a_plugin_that_cannot_be_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    data = tmp_path / "data"
    monkeypatch.setenv("GIANT_DATA_DIR", str(data))
    items = pd.DataFrame(
        {"benchmark_name": ["tcga", "tcga", "panda"], "benchmark_id": ["1", "2", "3"],
         "prompt": ["q"] * 3, "wsi_status": ["ok"] * 3}
    )  # fmt: skip
    ParquetStore(data).write("benchmark_items", items)
    path = write_experiments(
        tmp_path / "experiments.yaml",
        {"random": {"agent": "random"}, "gone": {"agent": GONE, "model": "gpt-5"},
         "two": {"agent": TWO, "model": "gpt-5-mini", "agent_options": {"answerer": "gpt-5"}}},
    )  # fmt: skip
    args = ["--file", str(path)]
    state = "plug-in cannot be imported: module 'lab_gone.agent'"

    assert experiments_cli.main([*args, "list"]) == 0
    lines = {line.split("\t")[0]: line.split("\t") for line in capsys.readouterr().out.splitlines()}
    assert lines["gone"][-1] == f"- ({state})"
    assert len(lines["random"][-1]) == 12 and len(lines["two"][-1]) == 12  # the others keep their hash

    assert experiments_cli.main([*args, "status"]) == 0
    out = capsys.readouterr().out
    (gone,) = [line for line in out.splitlines() if line.startswith("gone ")]
    assert "2 cell(s): 2 unusable" in gone and gone.endswith(state)
    assert any(line.startswith("random ") and "2 to do" in line for line in out.splitlines())
    assert experiments_cli.main([*args, "status", "gone"]) == 0
    cells = [line for line in capsys.readouterr().out.splitlines() if line.startswith("gone ")]
    assert len(cells) == 2 and all("unusable" in c and state in c for c in cells)

    assert experiments_cli.main([*args, "estimate", "gone"]) == 1
    assert state in capsys.readouterr().err
    assert experiments_cli.main([*args, "estimate", "two"]) == 0
    out = capsys.readouterr().out
    assert "1 call(s) of gpt-5 per run, as it declares" in out and "1 call(s) of gpt-5-mini" in out
