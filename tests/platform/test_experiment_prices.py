"""Prices per experiment, and never a silent $0 (issue 31).

Real predictions materializations of the declared OpenRouter example (``openrouter-gpt5-giant``) at the
loopback scripted model, as tests/platform/test_cloud_provider_runs.py runs it: the price its calls are
billed at comes from the experiment's ``prices``, else the ``GIANT_PRICES`` file, else the built-in
table, and ``settings.json`` and the predictions metadata say which; a model no source prices runs
uncapped with its cost unknown (NaN in the rows, the metadata, the metrics and the leaderboard), and a
capped paid one is refused, at ``giant-experiments check`` and before any call.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from dagster import AssetSelection, DagsterEventType, materialize

from giant_assets.core.storage import ParquetStore
from giant_assets.demo.scripted import ScriptedModelServer, demo_policy
from giant_assets.eval.leaderboard import leaderboard_markdown, leaderboard_table
from giant_assets.experiments.spec import Experiment
from giant_assets.platform.definitions import ALL_ASSETS
from giant_assets.platform.experiments_cli import main as experiments_main
from giant_assets.platform.partitions import result_key
from giant_assets.runs.ledger import PartitionLedger
from tests.support.dagster_env import add_experiments, ingested_sample, write_experiments

REPO = Path(__file__).resolve().parents[2]
NAME, BENCHMARK = "openrouter-gpt5-giant", "tcga_slidebench"  # 3 items on 2 sample slides
CELL = AssetSelection.assets("predictions", "trajectory_steps", "item_predictions", "benchmark_metrics")
KEY = "sk-or-v1-SECRET-0123456789abcdef0123456789abcdef"
MYSTERY = "acme/mystery-vlm"  # priced by no built-in entry
FILE_PRICE = {"input_per_mtok": 2.0, "output_per_mtok": 20.0}
EXP_PRICE = {"input_per_mtok": 3.0, "output_per_mtok": 30.0, "cached_input_per_mtok": 0.3}
HOW = ("prices field", "GIANT_PRICES", "built-in table")


def declared() -> dict[str, Any]:
    return dict(yaml.safe_load((REPO / "experiments.yaml").read_text())["experiments"][NAME])


@pytest.fixture
def cell(tmp_path: Path, sample_wsi_root: Path, monkeypatch: pytest.MonkeyPatch):
    """(run, declare, server, data): the example's cell over the bundled sample, its model at loopback."""
    data = tmp_path / "data"
    monkeypatch.setenv("GIANT_DATA_DIR", str(data))
    monkeypatch.delenv("GIANT_PRICES", raising=False)
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    experiments_file = tmp_path / "experiments.yaml"
    instance, resources = ingested_sample(data, experiments_file, sample_wsi_root)
    add_experiments(instance, NAME)
    with ScriptedModelServer(rule=demo_policy) as server:

        def declare(**changes: Any) -> None:
            settings = declared() | {"base_url": f"{server.base_url}/api/v1"} | changes
            write_experiments(experiments_file, {NAME: {k: v for k, v in settings.items() if v is not None}})

        def run():
            return materialize(
                ALL_ASSETS, selection=CELL, partition_key=result_key(NAME, BENCHMARK),
                resources=resources, instance=instance, raise_on_error=False,
            )  # fmt: skip

        run.instance = instance  # type: ignore[attr-defined]
        yield run, declare, server, data


def price_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "prices.yaml"
    path.write_text(yaml.safe_dump({MYSTERY: FILE_PRICE, "gpt-5": FILE_PRICE}))  # gpt-5: the built-in key
    monkeypatch.setenv("GIANT_PRICES", str(path))
    return path


def expected_cost(row: pd.Series, price: dict[str, float]) -> float:
    cached = int(row["cached_input_tokens"])
    plain = int(row["input_tokens"]) - cached
    rate = price.get("cached_input_per_mtok", price["input_per_mtok"])
    return (
        plain * price["input_per_mtok"] + cached * rate + int(row["output_tokens"]) * price["output_per_mtok"]
    ) / 1e6


def metadata(result) -> dict[str, Any]:
    meta = result.asset_materializations_for_node("predictions")[0].metadata
    return {k: getattr(v, "value", v) for k, v in meta.items()}


@pytest.mark.parametrize(
    ("model", "in_experiment", "in_file", "source", "price"),
    [
        (MYSTERY, True, True, "experiment", EXP_PRICE),  # the experiment's price before the file's
        (MYSTERY, False, True, "file", FILE_PRICE),
        ("openai/gpt-5", False, True, "file", FILE_PRICE),  # the file's before the built-in table
        ("openai/gpt-5", False, False, "built-in", {"input_per_mtok": 1.25, "output_per_mtok": 10.0,
                                                     "cached_input_per_mtok": 0.125}),
    ],
)  # fmt: skip
def test_the_price_comes_from_the_experiment_then_the_file_then_the_table(
    cell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str, in_experiment: bool, in_file: bool,
    source: str, price: dict[str, float],
) -> None:  # fmt: skip
    run, declare, server, data = cell
    path = price_file(tmp_path, monkeypatch) if in_file else None
    # the declared example states OpenRouter's price: the table and the file show only without it
    declare(model=model, prices=EXP_PRICE if in_experiment else None)
    result = run()
    assert result.success and len(server.requests) == 6
    rows = ParquetStore(data).read("predictions", [f"{NAME}/{BENCHMARK}"])
    assert len(rows) == 3 and (rows["input_tokens"] > 0).all() and (rows["output_tokens"] > 0).all()
    for _, row in rows.iterrows():
        assert row["cost_usd"] == pytest.approx(expected_cost(row, price), rel=1e-9)
    (settings,) = (data / "journals").glob("*/settings.json")
    recorded = json.loads(settings.read_text())["prices"]
    assert recorded["source"] == source and recorded["model"] == model
    assert recorded["input_per_mtok"] == price["input_per_mtok"]
    assert recorded["output_per_mtok"] == price["output_per_mtok"]
    assert recorded.get("file") == (str(path) if source == "file" else None)
    assert recorded.get("read") == ("2025-12" if source == "built-in" else None)
    meta = metadata(result)
    assert json.loads(json.dumps(meta["price"]))["source"] == source
    assert meta["cost_usd_billed"] == pytest.approx(rows["cost_usd"].sum(), abs=1e-6)
    assert meta["cost_usd_not_counted"] == 0


def test_the_price_changes_no_config_hash() -> None:
    base = Experiment(name=NAME, **(declared() | {"prices": None}))
    priced = Experiment(name=NAME, **(declared() | {"prices": EXP_PRICE}))
    assert base.config_hash() == priced.config_hash() and priced.prices.input_per_mtok == 3.0
    with pytest.raises(ValueError, match="a number is required, not the YAML boolean"):
        Experiment(name=NAME, **(declared() | {"prices": {"input_per_mtok": True, "output_per_mtok": 1}}))
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        Experiment(name=NAME, **(declared() | {"prices": {"input_per_mtok": -1, "output_per_mtok": 1}}))


def test_an_uncapped_model_without_a_price_costs_unknown_never_zero(cell) -> None:
    """budget_usd 0: it runs, and every cost it shows is unknown (NaN / blank), not $0."""
    run, declare, server, data = cell
    declare(model=MYSTERY, prices=None, budget_usd=0)
    result = run()
    assert result.success and len(server.requests) == 6
    logs = "\n".join(e.user_message for e in run.instance.all_logs(result.run_id))
    assert "cost so far unknown (no price)" in logs and "$nan" not in logs
    rows = ParquetStore(data).read("predictions", [f"{NAME}/{BENCHMARK}"])
    assert len(rows) == 3 and rows["cost_usd"].isna().all() and (rows["input_tokens"] > 0).all()
    meta = metadata(result)
    for key in ("cost_usd_total", "cost_usd_billed", "cost_usd_not_counted"):
        assert math.isnan(meta[key]), key
    assert meta["price"]["source"] == "none"
    replies = [json.loads(line) for f in (data / "journals").glob("*/*.replies.jsonl") for line in f.open()]
    assert len(replies) == 6 and all(math.isnan(r["cost_usd"]) for r in replies)
    ledger = PartitionLedger(next((data / "journals").glob(f"*/{BENCHMARK}.jsonl")))
    assert ledger.spent() == 0 and ledger.unpriced == 6 and math.isnan(ledger.billed())
    metrics = ParquetStore(data).read("benchmark_metrics")
    (cell_row,) = metrics[metrics["experiment"] == NAME].to_dict("records")
    assert all(math.isnan(cell_row[k]) for k in ("cost_usd", "cost_usd_billed", "cost_usd_not_counted"))
    # beside a priced experiment: the leaderboard leaves its cost blank and adds nothing of it anywhere
    priced = dict(cell_row) | {"experiment": "priced", "cost_usd": 1.5, "cost_usd_billed": 2.0,
                               "cost_usd_not_counted": 0.5}  # fmt: skip
    # and a priced cell of its own (another benchmark) leaves its total unknown, not that cell's $1
    own = dict(cell_row) | {"benchmark_name": "gtex", "cost_usd": 1.0, "cost_usd_billed": 1.0,
                            "cost_usd_not_counted": 0.0}  # fmt: skip
    table = leaderboard_table(pd.DataFrame([cell_row, own, priced]))
    shown = {r["experiment"]: r for r in table.to_dict("records")}
    assert math.isnan(shown[NAME]["cost_usd"]) and math.isnan(shown[NAME]["cost_usd_billed"])
    assert shown["priced"]["cost_usd"] == 1.5
    markdown = leaderboard_markdown(table)
    line = next(x for x in markdown.splitlines() if x.startswith(f"| {NAME} "))
    assert "$" not in line and "$1.50" in markdown and "$2.00 ($0.50 not counted)" in markdown


def test_a_capped_paid_model_without_a_price_is_refused_before_any_call(
    cell, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At its real (paid) address with budget_usd 50: nothing sent, no journal, the model and the three
    ways to price it named; with the price in GIANT_PRICES it goes past the price check."""
    run, declare, server, data = cell
    monkeypatch.delenv("OPENROUTER_API_KEY")  # were it not refused, it would stop at the key, not call
    declare(model=MYSTERY, prices=None, base_url=None)
    result = run()
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type == DagsterEventType.STEP_FAILURE)
    message = failure.step_failure_data.user_failure_data.description
    assert f"experiment '{NAME}': no price for model '{MYSTERY}'" in message and "nothing is sent" in message
    assert all(way in message for way in HOW), message
    assert server.requests == [] and not (data / "journals").exists()
    price_file(tmp_path, monkeypatch)
    result = run()
    failure = next(e for e in result.all_events if e.event_type == DagsterEventType.STEP_FAILURE)
    message = failure.step_failure_data.error.to_string()
    assert "no price" not in message and "OPENROUTER_API_KEY is not set" in message


@pytest.mark.parametrize(
    ("changes", "refused"),
    [
        ({"model": MYSTERY}, True),  # budget_usd 50, no price anywhere
        ({"model": MYSTERY, "budget_usd": 0, "experiment_budget_usd": 10}, True),  # any cap
        ({"model": MYSTERY, "budget_usd": 0}, False),  # uncapped: runs, cost unknown
        ({"model": MYSTERY, "prices": EXP_PRICE}, False),
        ({"model": MYSTERY, "base_url": "http://127.0.0.1:9/api/v1"}, False),  # loopback: not paid
        ({}, False),  # the example as declared
    ],
)
def test_check_refuses_a_capped_paid_model_without_a_price(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    changes: dict[str, Any], refused: bool,
) -> None:  # fmt: skip
    monkeypatch.setenv("OPENROUTER_API_KEY", "test-key")  # the check also refuses an unset key
    monkeypatch.delenv("GIANT_PRICES", raising=False)
    settings = declared() | {"prices": None} | changes if changes else declared()
    path = write_experiments(
        tmp_path / "experiments.yaml", {NAME: {k: v for k, v in settings.items() if v is not None}}
    )
    status = experiments_main(["check", "--file", str(path)])
    err = capsys.readouterr().err
    if refused:
        assert status == 1 and f"error: {path}: experiment '{NAME}': no price for model '{MYSTERY}'" in err
        assert all(way in err for way in HOW)
    else:
        assert status == 0 and not err
    if changes == {"model": MYSTERY}:  # the same with the price in a file: valid
        price_file(tmp_path, monkeypatch)
        assert experiments_main(["check", "--file", str(path)]) == 0


def test_a_cap_over_replies_of_unknown_cost_starts_no_run(cell) -> None:
    """Run uncapped without a price, then lose the journal and declare a price and a cap: the replies
    already paid have no known cost, so the ledger cannot keep the cap and no run starts."""
    run, declare, server, data = cell
    declare(model=MYSTERY, prices=None, budget_usd=0)
    assert run().success and len(server.requests) == 6
    next((data / "journals").glob(f"*/{BENCHMARK}.jsonl")).unlink()
    declare(model=MYSTERY, prices=EXP_PRICE, budget_usd=50)
    result = run()
    assert len(server.requests) == 6
    meta = metadata(result)
    assert meta["budget_stopped"] is True and meta["runs_not_started"] == 3
    logs = "\n".join(e.user_message for e in run.instance.all_logs(result.run_id))
    assert "budget $50 cannot be kept (6 reply(ies) or run(s) of this result set have no price" in logs
