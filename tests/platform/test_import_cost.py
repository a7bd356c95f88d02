"""Loading the code location imports only what loading needs.

Every ``dagster asset materialize`` process imports ``giant_assets.platform.definitions`` before its first
model call. The libraries below are used only inside functions most runs never call (region scoring, the
shared Redis rate limit, HuggingFace download, the HTML viewer, writing synthetic slides, the model SDKs),
so the import must leave them out of ``sys.modules``. Checked in a fresh interpreter: behaviour, not time.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# imported lazily, by the functions that use them (module -> where it is imported)
DEFERRED = {
    "shapely": "geometry/roi.py: Region.geometry, evaluate_viewed_regions",
    "redis": "runs/ratelimit.py: SharedRateLimiter",
    "limits": "runs/ratelimit.py: SharedRateLimiter, _per_window",
    "jinja2": "report/viewer/site.py: _environment",
    "huggingface_hub": "multipathqa/download.py: download_multipathqa",
    "tifffile": "slides/synthetic.py: write_pyramidal_slide",
    "duckdb": "core/storage.py: where the DuckDB file is opened (views, queries)",
    "openai": "agents/providers (model calls only)",
    "anthropic": "agents/providers (model calls only)",
}

CHILD = """
import gc, json, sys
from giant_assets.platform.definitions import ALL_ASSETS, CELL_ASSETS, defs

watched = json.loads(sys.argv[1])
after_import = sorted(m for m in watched if m in sys.modules)
collector = {"enabled": gc.isenabled(), "frozen": gc.get_freeze_count(), "tracked": len(gc.get_objects())}
jobs = {job.name: job for job in defs.resolve_all_job_defs()}
graph = defs.resolve_asset_graph()
keys = lambda assets: sorted(k.to_user_string() for a in assets for k in a.keys)
print(json.dumps({
    "collector": collector,
    "after_import": after_import,
    "after_resolve": sorted(m for m in watched if m in sys.modules),
    "declared_jobs": sorted(job.name for job in defs.jobs),
    "jobs": {name: sorted(k.to_user_string() for k in job.asset_layer.executable_asset_keys)
             for name, job in jobs.items()},
    "graph_assets": sorted(k.to_user_string() for k in graph.get_all_asset_keys()),
    "all_assets": keys(ALL_ASSETS),
    "cell_assets": keys(CELL_ASSETS),
}))
"""


def test_loading_definitions_leaves_optional_libraries_unimported() -> None:
    # each watched library is installed: its absence from sys.modules below means "not imported"
    missing = [name for name in DEFERRED if importlib.util.find_spec(name) is None]
    assert not missing, f"not installed, so the check below would prove nothing: {missing}"

    proc = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(sorted(DEFERRED))],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])

    imported = {name: DEFERRED[name] for name in out["after_import"]}
    assert not imported, f"importing the definitions imported {imported}"
    assert out["after_resolve"] == [], "resolving the jobs imported optional libraries"
    # what the imports made is frozen (core/heap.py): later collections scan only what came after
    assert out["collector"]["enabled"] and out["collector"]["frozen"] > 10 * out["collector"]["tracked"]

    # the Definitions still resolve: every declared job, and the implicit asset job over every asset
    assert set(out["declared_jobs"]) <= set(out["jobs"]) and "evaluate_cell" in out["declared_jobs"]
    assert out["jobs"]["evaluate_cell"] == out["cell_assets"]
    assert len(out["all_assets"]) == len(set(out["all_assets"])) > len(out["cell_assets"])
    assert set(out["graph_assets"]) == set(out["all_assets"])
    implicit = [keys for name, keys in out["jobs"].items() if name.startswith("__ASSET_JOB")]
    assert implicit and set().union(*map(set, implicit)) == set(out["all_assets"])


# imported by the agents only where they segment tissue or sample patches (the patch baseline, the
# random-region ablation); a GIANT or thumbnail run never does, and every predictions run builds its agent
SEGMENTATION_ONLY = ["scipy.ndimage", "skimage"]

AGENT_CHILD = """
import json, sys
import giant_assets.platform.definitions
from giant_assets.agents import baselines, giant, random_regions
print(json.dumps(sorted(m for m in json.loads(sys.argv[1]) if m in sys.modules)))
"""


def test_building_an_agent_leaves_the_segmentation_libraries_unimported() -> None:
    assert all(importlib.util.find_spec(name) for name in SEGMENTATION_ONLY)
    proc = subprocess.run(
        [sys.executable, "-c", AGENT_CHILD, json.dumps(SEGMENTATION_ONLY)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


# `giant-experiments list` and `check` read the experiments file and the environment: no Dagster instance,
# no table, no model call, so neither Dagster, pandas nor a model SDK (~6 CPU-s of imports, was every check)
FILE_ONLY = ["dagster", "pandas", "openai", "anthropic", "google.genai"]

CLI_CHILD = """
import contextlib, io, json, sys
from giant_assets.platform.experiments_cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(sys.argv[2:])
print(json.dumps({"code": code, "out": out.getvalue(),
                  "imported": sorted(m for m in json.loads(sys.argv[1]) if m in sys.modules)}))
"""


def test_listing_and_checking_experiments_import_no_dagster_pandas_or_sdk(tmp_path: Path) -> None:
    assert all(importlib.util.find_spec(name) for name in FILE_ONLY)
    # one experiment per sign-in the check names: OpenAI, Azure, Anthropic, Bedrock, Vertex, Gemini
    experiments = tmp_path / "e.yaml"
    experiments.write_text(
        "experiments:\n"
        "  o: {agent: giant, model: gpt-5}\n"
        "  az: {agent: giant, model: gpt-5, provider: azure, azure_endpoint: 'https://lab.openai.azure.com',"
        " deployment: g5}\n"
        "  c: {agent: giant, model: claude-sonnet-4-5, provider: anthropic}\n"
        "  b: {agent: giant, model: claude-sonnet-4-5, provider: bedrock, region: us-east-1}\n"
        "  v: {agent: giant, model: claude-sonnet-4-5, provider: vertex, region: us-east5,"
        " project: lab-proj}\n"
        "  g: {agent: giant, model: gemini-2.5-pro, provider: gemini}\n"
    )
    env = {
        k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_TOKEN_BEDROCK", "_ACCESS_TOKEN"))
    }
    for command in (["list"], ["check"]):
        proc = subprocess.run(
            [sys.executable, "-c", CLI_CHILD, json.dumps(FILE_ONLY), "--file", str(experiments), *command],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        assert out["imported"] == [], (command, out)
        if command == ["check"]:  # what it says is what the model classes read (tests/agents: the table)
            assert out["code"] == 1, out
            for name, variable in (
                ("o", "OPENAI_API_KEY"),
                ("c", "ANTHROPIC_API_KEY"),
                ("g", "GEMINI_API_KEY"),
            ):
                assert f"\n{name}: signs in with API key from ${variable}\n" in f"\n{out['out']}", out
                assert f"experiment '{name}': ${variable} is not set" in proc.stderr, proc.stderr


# giant-run builds one GIANT (or baseline-free) agent and asks the model: pandas (~0.6 CPU-s of each
# giant-run) is imported only by the offline agents and the tables, neither of which it uses
GIANT_RUN_CHILD = """
import json, sys
from giant_assets.agents.registry import make_agent
from giant_assets.experiments.spec import Experiment
from giant_assets.runs.ratelimit import make_rate_limiter
exp = Experiment(name="x", agent="giant", model="gpt-5", base_url="http://127.0.0.1:9/v1")
limiter = make_rate_limiter(exp.provider, exp.model, exp.api_key_env, exp.requests_per_minute)
agent = make_agent(exp, None, limiter)
print(json.dumps({"agent": type(agent).__name__, "pandas": "pandas" in sys.modules}))
"""


def test_building_a_giant_agent_without_truth_labels_imports_no_pandas() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", GIANT_RUN_CHILD],
        cwd=REPO, capture_output=True, text=True, timeout=300, env=os.environ | {"OPENAI_API_KEY": "sk-x"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"agent": "GiantAgent", "pandas": False}


INSTANCE_CHILD = """
import json, shutil, sys
from dagster import DagsterInstance
from dagster._core.instance.ref import InstanceRef
shutil.copyfile(sys.argv[2], sys.argv[1] + "/dagster.yaml")
with DagsterInstance.from_ref(InstanceRef.from_dir(sys.argv[1])) as instance:
    print(json.dumps([type(instance).__name__, "dagster_postgres" in sys.modules]))
"""


def test_an_instance_on_sqlite_imports_no_postgres_library(tmp_path: Path) -> None:
    """Every run worker and command opens the instance: on SQLite (the default) the PostgreSQL pool
    (platform/postgres_pool.py) must not import dagster_postgres (~0.6 CPU-s)."""
    assert importlib.util.find_spec("dagster_postgres") is not None
    proc = subprocess.run(
        [sys.executable, "-c", INSTANCE_CHILD, str(tmp_path), str(REPO / "dagster_home" / "dagster.yaml")],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == ["GiantInstance", False]
