"""A plug-in's model errors keep their kind (a content filter's block is ``content_filtered``, not an agent
error to re-run), and a second model cannot join batch mode: refused naming both models."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pandas as pd
import pytest

from giant_assets.agents.registry import make_agent
from giant_assets.demo.scripted import Reply, ScriptedModelServer, answer_reply, crop_reply
from giant_assets.experiments.plugins import PluginError
from giant_assets.experiments.spec import Experiment
from giant_assets.kit import Message, TextPart
from giant_assets.runs.agent_api import AgentItem
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.support.slides import write_pyramidal_slide

PACKAGES = Path(__file__).parent / "packages"
KEY = "azure-key-0123456789abcdef0123456789abcdef"
FILTERED = {
    "error": {
        "message": "The response was filtered due to the prompt triggering Azure OpenAI's content management "
        "policy.",
        "type": None, "param": "prompt", "code": "content_filter", "status": 400,
        "innererror": {"code": "ResponsibleAIPolicyViolation",
                       "content_filter_result": {"violence": {"filtered": True, "severity": "medium"}}},
    }
}  # fmt: skip


@pytest.fixture(autouse=True)
def plugin_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(PACKAGES))


def test_a_filtered_prompt_fails_the_plugins_run_as_content_filtered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    slide = write_pyramidal_slide(tmp_path / "slide.tiff", ONE_LESION_DESIGN, levels=4)
    blocked = Reply(status=400, body=json.dumps(FILTERED).encode())
    with ScriptedModelServer([crop_reply(0, 0, 2048, 1536), blocked]) as server:
        exp = Experiment(
            name="lab", agent="lab_agent:make_agent", provider="azure", model="gpt-5",
            deployment="lab-gpt5", azure_endpoint=server.base_url,
        )  # fmt: skip

        async def go():
            agent = make_agent(exp, pd.DataFrame(), None)
            try:
                return await agent.answer(AgentItem("tcga", "1", "Which organ?", None, str(slide)), 0)
            finally:
                await agent.aclose()

        answer = asyncio.run(go())
        asked = len(server.requests)
    assert answer.error_kind == "content_filtered" and answer.text == ""
    assert "plug-in lab_agent:make_agent: raised ContentFiltered" in answer.error
    assert asked == 2  # the proposal, then the blocked call: not retried


def test_a_second_model_is_refused_in_batch_mode() -> None:
    exp = Experiment(
        name="two", agent="lab_agent:make_agent", provider="azure", model="gpt-5", deployment="d",
        azure_endpoint="http://127.0.0.1:9", batch=True,
    )  # fmt: skip
    agent = make_agent(exp, pd.DataFrame(), None)
    with pytest.raises(
        PluginError, match="batch: true sends only the experiment's model 'gpt-5'.*'gpt-5-mini'"
    ):
        agent.kit.chat_model("gpt-5-mini")
    asyncio.run(agent.aclose())


def test_a_second_model_on_azure_calls_its_own_deployment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    with ScriptedModelServer([answer_reply(1), answer_reply(2)]) as server:
        exp = Experiment(
            name="two", agent="lab_agent:make_agent", provider="azure", model="gpt-5", deployment="lab-gpt5",
            azure_endpoint=server.base_url,
        )  # fmt: skip
        agent = make_agent(exp, pd.DataFrame(), None)

        async def go() -> None:
            try:
                other = agent.kit.chat_model("gpt-5-mini")
                await agent.kit.model.complete([Message.user(TextPart("first"))])
                await other.complete([Message.user(TextPart("second"))])
            finally:
                await agent.aclose()

        asyncio.run(go())
        routes = [r.route_params.get("deployment") or (r.json or {}).get("model") for r in server.requests]
    assert routes == ["lab-gpt5", "gpt-5-mini"]
