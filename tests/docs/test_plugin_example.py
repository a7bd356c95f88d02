"""docs/plugins.md's worked example runs as written: its YAML declaration (pointed at the loopback scripted
model) runs the shipped ``examples/two_model_agent`` over the sample's tcga_slidebench cell (``run_cell``:
journal, reply store, prices), the proposer sees the overview, the answerer only the crop it proposed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from giant_assets.agents.cell import run_cell
from giant_assets.demo.scripted import ScriptedModelServer, demo_policy
from giant_assets.experiments.declared import load_experiments
from giant_assets.experiments.plugins import PluginError
from tests.docs.commands import fences
from tests.support.dagster_env import ingested_sample

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
BENCHMARK = "tcga_slidebench"
PRICES = {  # USD per million tokens, chosen here
    "gpt-5-mini": {"input_per_mtok": 2.0, "output_per_mtok": 4.0},
    "gpt-5": {"input_per_mtok": 10.0, "output_per_mtok": 30.0},
}


def documented() -> dict:
    """The YAML block of docs/plugins.md, parsed."""
    blocks = [f for f in fences((REPO / "docs" / "plugins.md").read_text()) if f.lang == "yaml"]
    assert len(blocks) == 1
    return yaml.safe_load("\n".join(blocks[0].lines))


def test_the_documented_two_model_agent_runs(
    tmp_path: Path, sample_wsi_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    data = tmp_path / "data"
    monkeypatch.setenv("GIANT_DATA_DIR", str(data))
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps(PRICES))
    monkeypatch.setenv("GIANT_PRICES", str(prices))
    declared = tmp_path / "experiments.yaml"
    ingested_sample(data, declared, sample_wsi_root)
    items = pd.read_parquet(data / "benchmark_items" / "_all.parquet")
    doc = documented()
    with ScriptedModelServer(rule=demo_policy) as server:
        doc["experiments"]["two-model"]["base_url"] = server.openai_base_url
        declared.write_text(yaml.safe_dump(doc))
        exp = load_experiments(declared)["two-model"]
        result = run_cell(exp, items, BENCHMARK, data, experiments_file=declared, log=lambda _: None)
        requests = list(server.requests)
    rows = result.rows
    assert len(rows) == 3 and rows["error_kind"].isna().all() and rows["predicted_label"].notna().all()
    # its identity: the example's file by content (not from a distribution), and its options
    source = (EXAMPLES / "two_model_agent" / "__init__.py").read_bytes()
    plugin = exp.answer_settings()["plugin"]
    assert plugin["sha256"] == hashlib.sha256(source).hexdigest()
    assert exp.answer_settings()["agent_options"] == {"answerer": "gpt-5", "regions": 1}
    # per run: the proposer (gpt-5-mini) sees the overview, the answerer (gpt-5) only the proposed crop
    models = [r.json["model"] for r in requests]
    assert sorted(models) == ["gpt-5"] * 3 + ["gpt-5-mini"] * 3
    for row in rows.to_dict("records"):
        steps = json.loads(row["trajectory_json"])
        assert [s["action"] for s in steps] == ["thumbnail", "crop", "answer"]
        overview, crop = steps[0]["image_sha256"][0], steps[1]["image_sha256"][0]
        sent = {
            r.json["model"]: [hashlib.sha256(b).hexdigest() for t in r.turns for b in t.images]
            for r in requests
            if any(hashlib.sha256(b).hexdigest() in (overview, crop) for t in r.turns for b in t.images)
        }
        assert sent == {"gpt-5-mini": [overview], "gpt-5": [crop]}
        for step, model in ((steps[1], "gpt-5-mini"), (steps[2], "gpt-5")):
            price = PRICES[model]
            usd = (
                price["input_per_mtok"] * step["input_tokens"]
                + price["output_per_mtok"] * step["output_tokens"]
            )
            assert step["input_tokens"] > 0 and step["cost_usd"] == pytest.approx(usd / 1e6)
        assert row["cost_usd"] == pytest.approx(steps[1]["cost_usd"] + steps[2]["cost_usd"])


def test_the_example_refuses_bad_options_naming_the_field(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    from giant_assets.agents.registry import make_agent

    doc = documented()
    body = doc["experiments"]["two-model"] | {"base_url": "http://127.0.0.1:9/v1"}
    for options, message in [
        ({"regions": 1}, "agent_options.answerer: the answering model's name is required"),
        ({"answerer": "gpt-5", "regions": 9}, "agent_options.regions: a whole number from 1 to 8, not 9"),
        ({"answerer": "gpt-5", "regions": True}, "agent_options.regions: a whole number from 1 to 8"),
    ]:
        declared = tmp_path / "experiments.yaml"
        declared.write_text(yaml.safe_dump({"experiments": {"two-model": body | {"agent_options": options}}}))
        exp = load_experiments(declared)["two-model"]
        with pytest.raises(
            PluginError, match="its factory raised ValueError: " + message.replace("(", r"\(")
        ):
            make_agent(exp, pd.DataFrame(), None)
