"""The declared cloud examples (experiments.yaml ``azure-gpt5-giant``, ...) as a user runs them: a real
predictions materialization over the sample slides, and ``giant-run``, each through its provider's SDK
client at its own routes on the loopback scripted model (only the endpoint changed); credentials come
from the environment and never reach the stored rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from dagster import DagsterInstance, materialize

from giant_assets.agents.pricing import load_price_table
from giant_assets.core.storage import ParquetStore
from giant_assets.demo.batch_api import BatchAPIServer
from giant_assets.demo.scripted import (
    RecordedRequest,
    Reply,
    ScriptedModelServer,
    answer_reply,
    crop_reply,
    demo_policy,
)
from giant_assets.platform.assets.ingest import benchmark_items, multipathqa_csv
from giant_assets.platform.assets.predictions import predictions
from giant_assets.platform.partitions import result_key
from tests.support.cloud import AWS_ENV, AWS_SECRET, ManagedIdentityEndpoint, service_account
from tests.support.dagster_env import add_experiments, ingested_sample, write_experiments

REPO = Path(__file__).resolve().parents[2]
PARTITION = "tcga_slidebench"  # 3 items on 2 sample slides
AZURE_KEY = "azure-key-SECRET-0123456789abcdef0123456789"


# name -> (the settings pointed at the loopback server, the environment, the route every request takes)
def _azure(url: str) -> dict[str, Any]:
    return {"azure_endpoint": url}


def _openrouter(url: str) -> dict[str, Any]:
    return {"base_url": f"{url}/api/v1"}


OPENROUTER_KEY = "sk-or-v1-SECRET-0123456789abcdef0123456789abcdef"


def _bedrock(url: str) -> dict[str, Any]:  # and Gemini: base_url is the API root
    return {"base_url": url}


def _vertex(url: str) -> dict[str, Any]:
    return {"base_url": f"{url}/v1"}


GEMINI = "/v1beta/models/gemini-2.5-pro"
GEMINI_KEY = "AIza" + "SECRETgeminiKey0123456789abcdefghijk"
VERTEX = "/v1/projects/your-gcp-project/locations/us-east5/publishers/anthropic/models"
VERTEX_GEMINI = "/v1beta1/projects/your-gcp-project/locations/us-central1/publishers/google/models"
BEDROCK = "/model/us.anthropic.claude-sonnet-4-5-20250929-v1:0/invoke"
CASES: dict[str, tuple[Callable[[str], dict[str, Any]], dict[str, str], str]] = {
    "azure-gpt5-giant": (_azure, {"AZURE_OPENAI_API_KEY": AZURE_KEY}, "/openai/responses"),
    "openrouter-gpt5-giant": (
        _openrouter, {"OPENROUTER_API_KEY": OPENROUTER_KEY}, "/api/v1/chat/completions"
    ),
    "bedrock-claude-giant": (_bedrock, AWS_ENV, BEDROCK),
    "vertex-claude-giant": (_vertex, {}, f"{VERTEX}/claude-sonnet-4-5@20250929:rawPredict"),
    "gemini-giant": (_bedrock, {"GEMINI_API_KEY": GEMINI_KEY}, f"{GEMINI}:generateContent"),
    "vertex-gemini-giant": (_bedrock, {}, f"{VERTEX_GEMINI}/gemini-2.5-pro:generateContent"),
}  # fmt: skip
SECRETS = [AZURE_KEY, OPENROUTER_KEY, AWS_SECRET, GEMINI_KEY]


def environment(name: str, server: ScriptedModelServer, tmp_path: Path) -> dict[str, str]:
    """The case's credentials; for Vertex, a key file whose token endpoint is ``server``."""
    environ = dict(CASES[name][1])
    if name.startswith("vertex"):
        key = service_account(tmp_path / "sa.json", f"{server.base_url}/token")
        environ["GOOGLE_APPLICATION_CREDENTIALS"] = str(key)
        private_key = json.loads(key.read_text())["private_key"]
        SECRETS.extend([server.access_token, private_key.splitlines()[1]])  # the token, a line of the key
    return environ


def declared(name: str) -> dict[str, Any]:
    return dict(yaml.safe_load((REPO / "experiments.yaml").read_text())["experiments"][name])


def materialize_cell(name: str, resources: dict, instance: DagsterInstance) -> Any:
    """``predictions`` of the experiment's cell on PARTITION (the sample ingested before)."""
    return materialize(
        [multipathqa_csv, benchmark_items, predictions],
        selection=[predictions],
        partition_key=result_key(name, PARTITION),
        resources=resources,
        instance=instance,
    )


@pytest.mark.parametrize("name", list(CASES))
def test_declared_cloud_example_materializes(tmp_path: Path, sample_wsi_root: Path, name: str) -> None:
    point, _, path = CASES[name]
    data = tmp_path / "data"
    mp = pytest.MonkeyPatch()
    mp.setenv("GIANT_DATA_DIR", str(data))
    experiments_file = tmp_path / "experiments.yaml"
    instance, resources = ingested_sample(data, experiments_file, sample_wsi_root)
    add_experiments(instance, name)
    try:
        with ScriptedModelServer(rule=demo_policy) as server:
            for k, v in environment(name, server, tmp_path).items():
                mp.setenv(k, v)
            write_experiments(experiments_file, {name: declared(name) | point(server.base_url)})
            result = materialize_cell(name, resources, instance)
            requests, refused = list(server.requests), list(server.refused)
            first = ParquetStore(data).read("predictions", [f"{name}/{PARTITION}"])
            # as after a kill before any run was journalled: the kept replies answer every request again
            journal = next((data / "journals").glob(f"*/{PARTITION}.jsonl"))
            journal.unlink()
            again = materialize_cell(name, resources, instance)
            assert again.success and len(server.requests) == len(requests)  # replayed: nothing paid again
    finally:
        mp.undo()
    assert result.success
    rows = ParquetStore(data).read("predictions", [f"{name}/{PARTITION}"])
    key = ["benchmark_id", "run_index"]
    replayed = rows.sort_values(key)["answer_text"].tolist()
    assert replayed == first.sort_values(key)["answer_text"].tolist()
    assert len(rows) == 3 and rows["error"].isna().all()
    for doc in rows["trajectory_json"]:
        assert [s["action"] for s in json.loads(doc)] == ["thumbnail", "crop", "answer"]
    assert (rows["cost_usd"] > 0).all()  # priced by the model's name
    assert len(requests) == 6 and refused == [] and {r.path for r in requests} == {path}
    stored = [f.read_bytes() for f in data.rglob("*") if f.is_file()]  # journals, Parquet, DuckDB, logs
    assert stored and not any(secret.encode() in blob for secret in SECRETS for blob in stored)


GIANT_RUN = Path(sys.executable).parent / "giant-run"


def told_to_answer(text: str) -> bool:
    """The protocol's last-turn signal: the tool result's count of calls left at 0 (JSON protocol: its
    own words)."""
    return "Function calls left: 0." in text or "This is your last turn" in text


def crop_to_the_end(request: RecordedRequest) -> Reply:
    """A model that asks for a new crop at every step until the protocol's last turn, then answers."""
    if told_to_answer(request.text):
        return answer_reply("2")
    n = request.assistant_turns
    return crop_reply(40 * n, 30 * n, 600 + 10 * n, 400 + 10 * n)


@pytest.mark.parametrize("name", list(CASES))
def test_declared_cloud_example_runs_the_full_20_step_protocol_through_giant_run(
    tmp_path: Path, sample_wsi_root: Path, name: str
) -> None:
    """GIANT's whole protocol through each provider's wire (giant-run with the declared example's
    settings): 19 crops, each answered with its image in the provider's tool-result shape, the last turn
    told to answer, then the answer; no credential in the trajectory or the output."""
    point, _, path = CASES[name]
    settings = declared(name)
    slide = next(sample_wsi_root.rglob("*.tiff"))
    with ScriptedModelServer(rule=crop_to_the_end) as server:
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        env |= environment(name, server, tmp_path)
        flags = {"provider": settings["provider"], "model": settings["model"]} | {
            k: v for k, v in (settings | point(server.base_url)).items()
            if k in ("azure_endpoint", "deployment", "region", "project", "base_url", "api_version")
        }  # fmt: skip
        argv = [str(GIANT_RUN), str(slide), "--question", "Which organ?", "--options", "Lung", "Liver",
                "--max-steps", "20", "--out", str(tmp_path / "t.json")]  # fmt: skip
        for k, v in flags.items():
            argv += [f"--{k.replace('_', '-')}", str(v)]
        result = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)
        requests = list(server.requests)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().splitlines()[-1].startswith("label: 2")
    steps = json.loads((tmp_path / "t.json").read_text())["steps"]
    assert [s["action"] for s in steps] == ["thumbnail"] + ["crop"] * 19 + ["answer"]
    assert len(requests) == 20 and {r.path for r in requests} == {path}
    # each request carries the model's turns so far; only the 20th is told it is the last
    assert [r.assistant_turns for r in requests] == list(range(20))
    assert [told_to_answer(r.text) for r in requests] == [False] * 19 + [True]
    assert all(r.images for r in requests)  # the thumbnail, and the crops as the wire sends them back
    written = (tmp_path / "t.json").read_text() + result.stdout + result.stderr
    assert not any(secret in written for secret in SECRETS)


def test_azure_with_an_entra_id_token_materializes_and_keeps_no_token(
    tmp_path: Path, sample_wsi_root: Path
) -> None:
    """The declared Azure example, keyless: a Microsoft Entra ID token from azure-identity's
    DefaultAzureCredential (a managed identity on loopback) in ``Authorization``, no ``api-key``; an
    error echoing the token is stored redacted, and the token is in none of the stored files."""
    name = "azure-gpt5-giant"
    data = tmp_path / "data"
    mp = pytest.MonkeyPatch()
    mp.setenv("GIANT_DATA_DIR", str(data))
    mp.delenv("AZURE_OPENAI_API_KEY", raising=False)
    experiments_file = tmp_path / "experiments.yaml"
    instance, resources = ingested_sample(data, experiments_file, sample_wsi_root)
    add_experiments(instance, name)

    echoed: list[str] = []

    def rule(request: RecordedRequest) -> Reply:  # the first request echoes its credentials back
        if not echoed:
            echoed.append(request.question)
            return Reply(status=400, text="bad request", echo_auth=True)
        return demo_policy(request)

    try:
        with ManagedIdentityEndpoint() as identity, ScriptedModelServer(rule=rule) as server:
            for k, v in (identity.env | {"GIANT_AZURE_AUTH": "entra"}).items():
                mp.setenv(k, v)
            settings = declared(name) | _azure(server.base_url) | {"max_failed_share": 1.0}
            write_experiments(experiments_file, {name: settings})
            result = materialize_cell(name, resources, instance)
            requests, token = list(server.requests), identity.token
    finally:
        mp.undo()
    assert result.success
    assert requests and all(r.headers["authorization"] == f"Bearer {token}" for r in requests)
    assert not any("api-key" in r.headers for r in requests)
    rows = ParquetStore(data).read("predictions", [f"{name}/{PARTITION}"])
    errors = rows["error"].dropna().tolist()
    assert len(errors) == 1 and "invalid credentials" in errors[0] and "Bearer" in errors[0]
    assert rows["error"].isna().sum() == 2
    stored = [f.read_bytes() for f in data.rglob("*") if f.is_file()]  # journals, Parquet, DuckDB, logs
    assert stored and not any(token.encode() in blob for blob in stored)


def test_declared_gemini_example_in_batch_mode_completes_at_half_price(
    tmp_path: Path, sample_wsi_root: Path
) -> None:
    """``gemini-giant`` with ``batch: true``: every request goes through Gemini's batch routes (the
    loopback batch server has no generateContent route), each line paid once, each row priced at half
    what its tokens cost synchronously; the key reaches no stored file."""
    name, data = "gemini-giant", tmp_path / "data"
    mp = pytest.MonkeyPatch()
    mp.setenv("GIANT_DATA_DIR", str(data))
    mp.setenv("GEMINI_API_KEY", GEMINI_KEY)
    experiments_file = tmp_path / "experiments.yaml"
    instance, resources = ingested_sample(data, experiments_file, sample_wsi_root)
    add_experiments(instance, name)
    try:
        with ScriptedModelServer(rule=demo_policy) as model, BatchAPIServer(model, polls_to_finish=2) as api:
            batched = {"base_url": api.base_url, "batch": True, "batch_wait": "hold", "batch_poll_s": 0.05}
            write_experiments(experiments_file, {name: declared(name) | batched})
            result = materialize_cell(name, resources, instance)
            lines = [cid for b in api.batches.values() for cid, _ in b.lines]
            creates = [c for c in api.calls if c == ("POST", f"{GEMINI}:batchGenerateContent")]
            assert len(lines) == 6 and set(api.answered.values()) == {1} and len(model.requests) == 6
            assert len(creates) == len(api.batches) == 2  # one round per GIANT step
    finally:
        mp.undo()
    assert result.success
    rows = ParquetStore(data).read("predictions", [f"{name}/{PARTITION}"])
    assert len(rows) == 3 and rows["error"].isna().all()
    for doc in rows["trajectory_json"]:
        assert [s["action"] for s in json.loads(doc)] == ["thumbnail", "crop", "answer"]
    price = load_price_table().lookup("gemini-2.5-pro")[1]
    for row in rows.itertuples():
        sync = price.usd(row.input_tokens, row.output_tokens, row.cached_input_tokens)
        assert row.input_tokens > 0 and row.cost_usd == pytest.approx(sync / 2, rel=1e-9)
    stored = [f.read_bytes() for f in data.rglob("*") if f.is_file()]
    assert stored and not any(GEMINI_KEY.encode() in blob for blob in stored)
