"""``giant-scripted-model`` as a user runs it: a real subprocess that prints its URL, answers
``giant-run`` (the OpenAI SDK over loopback) as the docs show, and stops cleanly on SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.support.slides import write_pyramidal_slide

REPO = Path(__file__).resolve().parents[2]
GIANT_RUN = Path(sys.executable).parent / "giant-run"
URL_PREFIX = "scripted model: http://127.0.0.1:"


def serve(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "giant_assets.demo.serve_cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


@pytest.fixture
def model():
    process = serve("--port", "0")
    try:
        first = process.stdout.readline()
        assert first.startswith(URL_PREFIX), first + process.stderr.read()
        yield process, first.split()[2]  # the OpenAI base URL: http://127.0.0.1:<port>/v1
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def test_it_prints_its_url_answers_giant_run_and_stops_on_sigterm(model, tmp_path: Path) -> None:
    process, url = model
    assert url.endswith("/v1")
    slide = write_pyramidal_slide(tmp_path / "slide.tiff", ONE_LESION_DESIGN, levels=3)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}  # loopback: no key needed
    run = subprocess.run(
        [str(GIANT_RUN), str(slide), "--question", "What is the level of mitotic activity?",
         "--options", "Low", "Medium", "High", "--provider", "openai", "--model", "scripted-demo",
         "--base-url", url],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.strip().splitlines()
    assert lines[-1] in {"label: 1", "label: 2", "label: 3"}
    asked = [line.split()[2] for line in lines if line.startswith("step ") and "thumbnail" not in line]
    assert asked == ["crop", "answer"]  # the demo policy crops once, then answers: a request each

    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=20)
    assert process.returncode == 0, err
    assert out.strip() == f"scripted model: stopped after {len(asked)} requests"


def test_a_taken_port_is_one_clear_line_and_exit_2() -> None:
    with socket.create_server(("127.0.0.1", 0)) as holder:  # e.g. another giant-scripted-model's port
        port = str(holder.getsockname()[1])
        second = serve("--port", port)
        out, err = second.communicate(timeout=60)
    assert second.returncode == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and f"127.0.0.1:{port}" in err and "--port" in err


def test_the_command_is_installed_as_giant_scripted_model() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["giant-scripted-model"] == "giant_assets.demo.serve_cli:main"


def _with_the_demos_own(given: Path, folder: Path, monkeypatch: pytest.MonkeyPatch):
    """``given`` composed with the demo's own declarations, as ``make demo`` runs it (the example plug-in
    importable, as the demo puts it on the path)."""
    from giant_assets.demo.overlay import COMPOSED_NAME, compose
    from giant_assets.demo.pipeline import PLUGIN_PATH
    from giant_assets.platform.resources import ExperimentsResource

    monkeypatch.syspath_prepend(str(PLUGIN_PATH))
    return ExperimentsResource(path=str(compose(given, folder / COMPOSED_NAME)))


def test_the_demo_rebinds_its_own_experiments_after_a_protocol_upgrade(tmp_path, capsys, monkeypatch) -> None:
    """A data dir kept from an older giant-assets: the demo's experiments were bound under protocol 2."""
    import json

    from giant_assets.demo.pipeline import EXPERIMENTS, _rebind_after_upgrade
    from giant_assets.experiments.binding import ExperimentConflict, bind, binding_path

    experiments = _with_the_demos_own(REPO / "experiments.yaml", tmp_path / "composed", monkeypatch)
    for name in EXPERIMENTS:
        bind(experiments.get(name), tmp_path)
    stale = binding_path(tmp_path, "demo-giant")
    doc = json.loads(stale.read_text())
    doc["answer_settings"]["protocol_version"] = "2"
    stale.write_text(json.dumps(doc))
    with pytest.raises(ExperimentConflict):
        bind(experiments.get("demo-giant"), tmp_path)
    _rebind_after_upgrade(tmp_path, experiments)
    assert "demo-giant: bound to this version's protocol" in capsys.readouterr().out
    bind(experiments.get("demo-giant"), tmp_path)  # no conflict any more
    assert json.loads(stale.read_text())["config_hash"] == experiments.get("demo-giant").config_hash()


def test_the_demo_rebinds_its_own_experiments_after_a_scripted_policy_change(
    tmp_path, capsys, monkeypatch
) -> None:
    """A data dir where the older scripted policy ran (model scripted-demo): rebound to the new model name,
    whose settings hash to other journals; any other change of a demo experiment still stops the demo."""
    import json

    from giant_assets.demo.pipeline import EXPERIMENTS, _rebind_after_upgrade
    from giant_assets.demo.scripted import DEMO_MODEL
    from giant_assets.experiments.binding import ExperimentConflict, bind, binding_path

    experiments = _with_the_demos_own(REPO / "experiments.yaml", tmp_path / "composed", monkeypatch)
    for name in EXPERIMENTS:
        bind(experiments.get(name), tmp_path)
    stale = binding_path(tmp_path, "demo-thumbnail")
    doc = json.loads(stale.read_text())
    doc["answer_settings"]["model"] = "scripted-demo"
    stale.write_text(json.dumps(doc))
    _rebind_after_upgrade(tmp_path, experiments)
    assert f"demo-thumbnail: bound to this version's scripted model {DEMO_MODEL}" in capsys.readouterr().out
    assert json.loads(stale.read_text())["answer_settings"]["model"] == DEMO_MODEL
    doc["answer_settings"]["runs_per_item"] = 3  # a change the demo did not make: never rebound silently
    stale.write_text(json.dumps(doc))
    with pytest.raises(ExperimentConflict, match="runs_per_item"):
        _rebind_after_upgrade(tmp_path, experiments)


def test_the_demo_uses_a_scripted_model_on_its_port_and_refuses_another_program(capsys) -> None:
    import http.server
    import threading

    from giant_assets.demo import pipeline
    from giant_assets.demo.scripted import (
        DEMO_MODEL,
        ScriptedModelServer,
        demo_policy,
        is_scripted_model,
        scripted_model_at,
    )

    with ScriptedModelServer(rule=demo_policy) as running:  # e.g. make ui's, or giant-scripted-model
        port = int(running.base_url.rsplit(":", 1)[1])
        assert is_scripted_model(port) and pipeline._demo_model(port) is None
        assert f"using the scripted model already serving on 127.0.0.1:{port}" in capsys.readouterr().out
    # a scripted model answering with another policy (an older checkout's make ui) is not used
    with ScriptedModelServer(rule=demo_policy) as older:
        older.demo_model = "scripted-demo"
        port = int(older.base_url.rsplit(":", 1)[1])
        assert scripted_model_at(port) == {"scripted_model": "giant-assets", "demo_model": "scripted-demo"}
        with pytest.raises(SystemExit, match=f"answers as scripted-demo, not as this version's {DEMO_MODEL}"):
            pipeline._demo_model(port)
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        assert not is_scripted_model(other.server_address[1])
        with pytest.raises(SystemExit, match="is taken by another program that is not the scripted model"):
            pipeline._demo_model(other.server_address[1])
    finally:
        other.shutdown()
        other.server_close()


def test_the_demo_serves_its_model_on_the_port_its_experiments_name(tmp_path, monkeypatch) -> None:
    """experiments.yaml's demo-* experiments name DEMO_PORT; a copy naming another port (the demo test's
    free one) moves the demo's model there; two different ports among them stop the demo."""
    from giant_assets.demo.pipeline import _demo_port
    from giant_assets.demo.serve_cli import DEMO_PORT

    def composed(given: Path):
        return _with_the_demos_own(given, tmp_path / "composed", monkeypatch)

    assert _demo_port(composed(REPO / "experiments.yaml")) == DEMO_PORT == 47321
    text = (REPO / "experiments.yaml").read_text()
    moved = tmp_path / "experiments.yaml"
    moved.write_text(text.replace(":47321/", ":50123/"))
    assert _demo_port(composed(moved)) == 50123
    moved.write_text(text.replace(":47321/", ":50123/", 1))
    with pytest.raises(SystemExit, match=r"different scripted-model ports \[47321, 50123\]"):
        _demo_port(composed(moved))
