"""The endpoint model calls go to: OPENAI_BASE_URL / ANTHROPIC_BASE_URL honoured as the official SDKs do
(a real loopback server receives the calls), recorded in the binding without credentials, and the
estimate calibrated only on runs at the same endpoint."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pandas as pd
import pytest

from giant_assets.agents.baselines import ThumbnailAgent
from giant_assets.agents.estimate import estimate_experiment
from giant_assets.agents.pricing import load_price_table
from giant_assets.agents.providers import make_chat_model
from giant_assets.agents.registry import save_settings
from giant_assets.demo.scripted import Reply, ScriptedModelServer
from giant_assets.experiments.binding import bind
from giant_assets.experiments.spec import Experiment
from giant_assets.runs.agent_api import AgentItem
from giant_assets.runs.journal import Journal
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.support.slides import write_pyramidal_slide

PRICES = load_price_table()
GIANT = Experiment(name="gpt5-giant", agent="giant", provider="openai", model="gpt-5", max_steps=8)


@pytest.fixture(autouse=True)
def _no_endpoint_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_sdk_variable_sends_the_calls_to_its_endpoint(
    provider: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slide = write_pyramidal_slide(tmp_path / "s.tiff", ONE_LESION_DESIGN, levels=3)
    exp = Experiment(name="t", agent="thumbnail", provider=provider, model="scripted-vlm")
    public = exp.config_hash()
    assert (
        exp.endpoint
        == {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}[provider]
    )
    with ScriptedModelServer(rule=lambda _: Reply('{"answer": 1}')) as server:
        url = server.openai_base_url if provider == "openai" else server.base_url
        monkeypatch.setenv(f"{provider.upper()}_BASE_URL", url)
        agent = ThumbnailAgent(make_chat_model(exp, None), exp, PRICES)

        async def go():
            try:
                return await agent.answer(AgentItem("gtex", "1", "Which organ?", ["a", "b"], str(slide)), 0)
            finally:
                await agent.aclose()

        answer = asyncio.run(go())
    assert answer.error is None and len(server.requests) == 1  # the call reached the variable's server
    # a loopback endpoint is no paid API; the endpoint is an answer setting, as base_url: another result set
    assert not exp.paid and exp.endpoint == url.rstrip("/")
    assert exp.answer_settings()["base_url"] == url and exp.config_hash() != public


def test_binding_and_settings_record_the_endpoint_without_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-proj-0123456789abcdefSECRET"
    monkeypatch.setenv(
        "OPENAI_BASE_URL", f"https://me:{secret}@gateway.example/v1?api-key={secret}&region=eu"
    )
    doc = bind(GIANT, tmp_path)
    assert doc["endpoint"] == "https://gateway.example/v1?api-key=[REDACTED]&region=eu"
    assert doc["answer_settings"]["base_url"] == doc["endpoint"]
    save_settings(GIANT, tmp_path / "settings.json")
    for path in (tmp_path / "experiments" / "gpt5-giant.json", tmp_path / "settings.json"):
        text = path.read_text()
        assert secret not in text and secret[:12] not in text and "me:" not in text
        assert json.loads(text)["endpoint"] == doc["endpoint"]
    monkeypatch.delenv("OPENAI_BASE_URL")  # the public API now: another endpoint, refused under the name
    with pytest.raises(ValueError, match="base_url"):
        bind(GIANT, tmp_path)
    assert bind(Experiment(name="offline", agent="random"), tmp_path)["endpoint"] == ""


def _journal(journals: Path, exp: Experiment, steps: int, runs: int, *, settings: bool = True) -> str:
    folder = journals / exp.config_hash()
    rows = [
        {"config_hash": exp.config_hash(), "agent": "giant", "model": "gpt-5", "benchmark_name": "tcga",
         "benchmark_id": f"old{i}", "run_index": 0, "n_steps": steps, "input_tokens": 1000 * steps,
         "output_tokens": 100 * steps, "latency_s": 2.0 * steps}
        for i in range(runs)
    ]  # fmt: skip
    Journal(folder / "tcga.jsonl").append(rows)
    if settings:
        save_settings(exp, folder / "settings.json")
    return folder.name


def _tcga(exp: Experiment, journals: Path):
    items = pd.DataFrame(
        [{"benchmark_name": "tcga", "benchmark_id": str(i), "wsi_status": "ok", "prompt": "q" * 400}
         for i in range(10)]
    )  # fmt: skip
    (one,) = estimate_experiment(exp, items, journals_dir=journals, prices=PRICES)
    return one


def test_a_rehearsal_at_a_local_server_does_not_calibrate_the_providers_estimate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journals = tmp_path / "journals"
    before = _tcga(GIANT, journals)
    assert (
        before.measured_runs == 0
        and "no finished run of giant/gpt-5 at https://api.openai.com/v1" in (before.notes[-1])
    )
    # a copy of gpt5-giant with base_url set at a local emulator, and gpt5-giant itself with OPENAI_BASE_URL
    _journal(journals, GIANT.model_copy(update={"name": "copy", "base_url": "http://127.0.0.1:9/v1"}), 2, 4)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8/v1")
    local = _journal(journals, GIANT, 1, 3)
    assert _tcga(GIANT, journals).measured_runs == 3  # at that endpoint: its own runs only
    monkeypatch.delenv("OPENAI_BASE_URL")
    _journal(journals, GIANT.model_copy(update={"model": "gpt-4o"}), 3, 5)  # another model
    _journal(journals, GIANT.model_copy(update={"max_steps": 9}), 3, 5, settings=False)  # endpoint unknown
    after = _tcga(GIANT, journals)
    assert (after.usd, after.hours, after.measured_runs) == (before.usd, before.hours, 0)
    # runs of another result set at the public endpoint do calibrate, and the note names them
    public = _journal(journals, GIANT.model_copy(update={"image_quality": 80}), 6, 2)
    calibrated = _tcga(GIANT, journals)
    assert calibrated.measured_runs == 2 and calibrated.calls.low == pytest.approx(10 * 6 * 0.75)
    assert f"journals {public} (2)" in calibrated.notes[0] and local not in calibrated.notes[0]
