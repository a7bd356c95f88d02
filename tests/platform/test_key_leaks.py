"""The API key is stored nowhere: a key read with a trailing newline (a secret file) is sent, stripped,
on every request, and a careless server that echoes it (in a tool call, in the model's text, whole or
as a prefix, in a 401 error body) gets none of it into any file the run wrote.

One real ``dagster asset materialize`` of a predictions partition (GIANT against the loopback model)
and one ``giant-run --out``; then every file under the data dir and DAGSTER_HOME (journal, Parquet,
DuckDB, run storage, compute logs) and the CLIs' stdout/stderr is searched for the key's first 12
characters (any prefix of 12 or more is a leak); Parquet files are also read, as they compress text.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
from dagster import DagsterInstance, materialize
from dagster._core.instance.ref import InstanceRef

from giant_assets.demo.scripted import Reply, ScriptedModelServer, answer_reply, demo_policy
from giant_assets.platform.assets.ingest import benchmark_items, multipathqa_csv
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.support.dagster_env import add_experiments, resources_for, write_experiments
from tests.support.slides import write_pyramidal_slide

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PARTITION = "tcga_slidebench"  # three items
EXPERIMENT = "leaky-server"
KEY_ENV = "GIANT_LEAK_TEST_KEY"


def echoes(key: str) -> list[Reply]:
    """One run's worth of a server that repeats the key back in every form it may take."""
    bearer = f"Bearer {key}"
    return [
        # a tool call whose arguments hold the Authorization header (the crop error quotes them)
        Reply("zooming", tool_args={"x0": bearer, "y0": 0, "w": 10, "h": 10}),
        # model text with the key raw, quoted, as bytes repr with its newline, and a 16-char prefix
        answer_reply(1, prose=f"{key} {json.dumps(key)} {(bearer + chr(10)).encode()!r} {key[:16]}..."),
    ]


def leaks(key: str, paths: list[Path], texts: dict[str, str]) -> list[str]:
    """Where the key's first 12 characters occur: file bytes, Parquet cells, or the given texts."""
    needle = key[:12]
    found = [name for name, text in texts.items() if needle in text]
    for path in paths:
        if needle.encode() in path.read_bytes():
            found.append(str(path))
        if path.suffix == ".parquet":
            frame = pd.read_parquet(path)
            if frame.astype(str).apply(lambda col: col.str.contains(needle, regex=False)).any().any():
                found.append(f"{path} (cells)")
    return found


def test_key_with_newline_echoed_by_the_server_lands_in_no_file(
    tmp_path: Path, sample_wsi_root: Path
) -> None:
    key = f"sk-{secrets.token_hex(24)}"
    data, home = tmp_path / "data", tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    ingest = materialize(
        [multipathqa_csv, benchmark_items],
        resources=resources_for(data, wsi_root=str(sample_wsi_root)),
        instance=DagsterInstance.ephemeral(),
    )
    assert ingest.success
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIANT_", "DAGSTER_"))}
    env |= {"DAGSTER_HOME": str(home), "GIANT_DATA_DIR": str(data), KEY_ENV: key + "\n"}

    # item 1: echoes in a tool call and in text; item 2: a 503 then a 401 quoting the header (the 503 is
    # retried with a warning, which the compute log captures); item 3: a normal run
    script = [*echoes(key), Reply(status=503, echo_auth=True), Reply(status=401, echo_auth=True)]
    with ScriptedModelServer(script, rule=demo_policy) as server:
        settings = {
            "agent": "giant", "provider": "openai", "model": "scripted-leaky", "concurrency": 1,
            "base_url": server.openai_base_url, "api_key_env": KEY_ENV,
            "max_failed_share": 0.5,  # the 401 fails one run of three on purpose: store it
        }  # fmt: skip
        env["GIANT_EXPERIMENTS"] = str(
            write_experiments(tmp_path / "experiments.yaml", {EXPERIMENT: settings})
        )
        with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
            add_experiments(instance, EXPERIMENT)
        run = subprocess.run(
            [str(BIN / "dagster"), "asset", "materialize", "-m", "giant_assets.platform.definitions",
             "--select", "predictions", "--partition", f"{PARTITION}|{EXPERIMENT}",
             "--config-json", json.dumps({"execution": {"config": {"in_process": {}}}})],
            env=env, cwd=REPO, capture_output=True, text=True, timeout=180, check=False,
        )  # fmt: skip
        dagster_requests = list(server.requests)
        server.script.extend(echoes(key))
        slide = write_pyramidal_slide(tmp_path / "cli" / "slide.tiff", ONE_LESION_DESIGN, levels=3)
        out = tmp_path / "cli" / "trajectory.json"
        cli = subprocess.run(
            [str(BIN / "giant-run"), str(slide), "--question", "Which?", "--options", "A", "B",
             "--provider", "openai", "--model", "gpt-5", "--base-url", server.openai_base_url,
             "--api-key-env", KEY_ENV, "--out", str(out)],
            env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert cli.returncode == 0, cli.stdout + cli.stderr

    # the key reached the server, stripped of its newline, on every request of both runs
    assert len(dagster_requests) >= 5 and len(server.requests) == len(dagster_requests) + 2
    assert {r.headers.get("Authorization") for r in server.requests} == {f"Bearer {key}"}
    # the echoes were stored, redacted: the crop error, the answer's report, the 401 error
    predictions = pd.read_parquet(data / "predictions" / EXPERIMENT / f"{PARTITION}.parquet")
    stored = " ".join(predictions["trajectory_json"]) + " ".join(predictions["error"].dropna())
    assert stored.count("[REDACTED]") >= 6 and "invalid credentials: 'Bearer [REDACTED]'" in stored
    assert "HTTP 401" in " ".join(predictions["error"].dropna())
    assert json.loads(out.read_text())["steps"][1]["error"].startswith(
        "invalid region: region ['Bearer [REDACTED]'"
    )

    files = [
        p for root in (data, home, out.parent) for p in root.rglob("*") if p.is_file() and not p.is_symlink()
    ]
    compute_logs = [p for p in files if p.suffix in (".out", ".err")]
    assert any(p.suffix == ".parquet" for p in files) and out in files
    # the retry warning reached the compute log, redacted
    echoed = "invalid credentials: 'Bearer [REDACTED]'"
    assert any(echoed in p.read_text(errors="replace") for p in compute_logs), compute_logs
    texts = {"dagster stdout": run.stdout, "dagster stderr": run.stderr, "giant-run": cli.stdout + cli.stderr}
    assert leaks(key, files, texts) == []
