"""``make ui``'s launcher as a user runs it: the Dagster UI answers, the daemon heartbeats, the demo's
scripted model takes its port once another process frees it and answers the OpenAI SDK there, SIGTERM
stops all three, and nothing prints Dagster's warning that ``dagster dev`` is superseded."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from dagster import DagsterInstance
from dagster._core.instance.ref import InstanceRef
from openai import OpenAI

from giant_assets.demo import ui

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what: str, done, process: subprocess.Popen, log: Path, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        if process.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"{what}: not ready (exit {process.poll()})\n{log.read_text()[-3000:]}")
        time.sleep(0.5)


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_ui_daemon_and_scripted_model_start_and_stop_together(tmp_path: Path) -> None:
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    ui_port, model_port = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIANT_", "DAGSTER_"))}
    env |= {"DAGSTER_HOME": str(home), "GIANT_DATA_DIR": str(tmp_path / "data")}
    log = tmp_path / "ui.log"
    blocker = socket.create_server(("127.0.0.1", model_port))  # e.g. a `make demo` still serving the port
    with open(log, "w") as out:
        ui = subprocess.Popen(
            [sys.executable, "-m", "giant_assets.demo.ui", "-w", "workspace.yaml",
             "--port", str(ui_port), "--model-port", str(model_port)],
            env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        wait_for("the UI", lambda: answers(f"http://127.0.0.1:{ui_port}/server_info"), ui, log)
        with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
            wait_for("the daemon", lambda: bool(instance.get_daemon_heartbeats()), ui, log)
        # the UI's code location has the name `-m giant_assets.platform.definitions` gives, so a backfill
        # launched from the shell with -m runs on this daemon
        query = "{ workspaceOrError { ... on Workspace { locationEntries { name } } } }"
        reply = httpx.post(f"http://127.0.0.1:{ui_port}/graphql", json={"query": query}, timeout=30).json()
        entries = reply["data"]["workspaceOrError"]["locationEntries"]
        assert [e["name"] for e in entries] == ["giant_assets.platform.definitions"]
        assert f"scripted model: 127.0.0.1:{model_port} is taken" in log.read_text()
        blocker.close()  # the port is free again: the launcher takes it over
        serving = f"scripted model: http://127.0.0.1:{model_port}/v1"
        wait_for("the scripted model", lambda: serving in log.read_text(), ui, log, seconds=30)
        model = OpenAI(base_url=f"http://127.0.0.1:{model_port}/v1", api_key="unused", max_retries=0)
        reply = model.chat.completions.create(
            model="scripted-demo", messages=[{"role": "user", "content": "Which organ?\n1. Lung\n2. Liver"}]
        )
        assert re.search(r'"answer": "[12]"}$', reply.choices[0].message.content)  # one of the options
        os.kill(ui.pid, signal.SIGTERM)
        assert ui.wait(timeout=60) == 0
    finally:
        blocker.close()
        if ui.poll() is None:
            os.killpg(ui.pid, signal.SIGKILL)
            ui.wait()
    text = log.read_text()
    assert f"Dagster UI: http://127.0.0.1:{ui_port}" in text
    assert f"scripted model: http://127.0.0.1:{model_port}/v1" in text
    assert "stopped: Dagster UI, daemon, scripted model" in text
    assert "superseded" not in text and "dg dev" not in text
    with pytest.raises(httpx.ConnectError):  # nothing left listening
        httpx.get(f"http://127.0.0.1:{ui_port}/server_info", timeout=2)
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{model_port}/v1", timeout=2)


def test_make_ui_runs_the_launcher_with_the_viewer_address() -> None:
    env = {k: v for k, v in os.environ.items() if k != "GIANT_VIEWER_URL"} | {"VIEW_PORT": "9123"}
    dry = subprocess.run(["make", "-n", "ui"], cwd=REPO, env=env, capture_output=True, text=True, check=True)
    assert "dagster dev" not in dry.stdout
    (line,) = [x for x in dry.stdout.splitlines() if x.endswith("-m giant_assets.demo.ui -w workspace.yaml")]
    assignment = line.split(" .venv/bin/python ")[0]  # the variables the recipe gives the launcher
    shown = subprocess.run(
        ["bash", "-c", f"{assignment} printenv GIANT_VIEWER_URL"], env=env, capture_output=True, text=True
    )
    assert shown.stdout.strip() == "http://127.0.0.1:9123/"  # the UI's viewer links follow VIEW_PORT


def stamped(db: Path) -> bool:
    """The SQLite file exists and holds its schema's alembic stamp (what the racing processes write)."""
    if not db.is_file():
        return False
    with sqlite3.connect(db) as con:
        return bool(con.execute("select count(*) from alembic_version").fetchone()[0])


STORAGES = ("history/runs.db", "history/runs/index.db", "schedules/schedules.db")


def test_the_launcher_creates_the_instance_storage_before_starting_webserver_and_daemon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The webserver and the daemon no longer race to create a fresh home's databases (alembic: "more
    than one head"): at the moment each starts, all three exist with their schema."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    seen: dict[str, list[bool]] = {}
    real = subprocess.Popen

    def start(args, **kwargs):  # the real process replaced by `true`, after looking at the home
        seen[Path(args[0]).name] = [stamped(home / db) for db in STORAGES]
        return real(["true"])

    monkeypatch.setattr(ui.subprocess, "Popen", start)
    monkeypatch.setattr(ui.signal, "signal", lambda *_: None)  # the launcher's handlers: not this process's
    assert ui.main(["--model-port", "-1", "--port", str(free_port())]) == 1  # `true` exits: "failed"
    assert seen == {"dagster-webserver": [True] * 3, "dagster-daemon": [True] * 3}
