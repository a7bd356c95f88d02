"""The declared open-model example (experiments.yaml ``vllm-qwen3vl-giant``) as a user runs it: a real
predictions materialization over the sample slides, the experiment copied with only its ``base_url``
changed, against a loopback server with vLLM's quirks (tests/support/local_servers.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from dagster import DagsterInstance, materialize

from giant_assets.core.storage import ParquetStore
from giant_assets.demo.scripted import ScriptedModelServer, demo_policy
from giant_assets.platform.assets.ingest import benchmark_items, multipathqa_csv
from giant_assets.platform.assets.predictions import predictions
from giant_assets.platform.partitions import result_key
from tests.support.dagster_env import add_experiments, resources_for, write_experiments
from tests.support.local_servers import Quirks, quirks

REPO = Path(__file__).resolve().parents[2]
EXPERIMENT = "vllm-qwen3vl-giant"
PARTITION = "tcga_slidebench"  # 3 items on 2 sample slides


def test_declared_vllm_example_materializes(tmp_path: Path, sample_wsi_root: Path) -> None:
    declared = yaml.safe_load((REPO / "experiments.yaml").read_text())
    settings = dict(declared["experiments"][EXPERIMENT])
    data = tmp_path / "data"
    mp = pytest.MonkeyPatch()
    mp.setenv("GIANT_DATA_DIR", str(data))
    mp.setenv("OPENAI_API_KEY", "sk-hosted-SECRET-never-for-a-local-server")
    instance = DagsterInstance.ephemeral()
    add_experiments(instance, EXPERIMENT)
    experiments_file = tmp_path / "experiments.yaml"
    resources = resources_for(data, experiments_file=experiments_file, wsi_root=str(sample_wsi_root))
    # vLLM started as docs/open-models.md says, but without a tool-call parser: calls come back as text
    q = Quirks(max_images=settings["server_image_limit"], strict_params=True, needs_tool_choice=True,
               calls_in_text="hermes")  # fmt: skip
    try:
        assert materialize([multipathqa_csv, benchmark_items], resources=resources, instance=instance).success
        with ScriptedModelServer(rule=quirks(demo_policy, q)) as server:
            write_experiments(experiments_file, {EXPERIMENT: settings | {"base_url": server.openai_base_url}})
            result = materialize(
                [multipathqa_csv, benchmark_items, predictions],
                selection=[predictions],
                partition_key=result_key(EXPERIMENT, PARTITION),
                resources=resources,
                instance=instance,
            )
            requests = list(server.requests)
    finally:
        mp.undo()
    assert result.success
    rows = ParquetStore(data).read("predictions", [f"{EXPERIMENT}/{PARTITION}"])
    assert len(rows) == 3 and rows["error"].isna().all()
    for doc in rows["trajectory_json"]:
        actions = [s["action"] for s in json.loads(doc)]
        assert actions == ["thumbnail", "crop", "answer"]  # the call read from the text was served
    assert len(requests) == 6 and all(r.json["model"] == "Qwen/Qwen3-VL-8B-Instruct" for r in requests)
    assert all("authorization" not in r.headers for r in requests)  # no key, above all not OpenAI's
    assert all(r.json["tool_choice"] == "auto" and "reasoning_effort" not in r.json for r in requests)
