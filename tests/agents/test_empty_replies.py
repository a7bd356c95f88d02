"""An empty reply is one rule on every provider: the model's answer with nothing in it, scored wrong
(``no_answer``), its tokens counted; never a failed run (``agent_error``, re-run on resume until the
model says something). Each wire's empty body, built by hand, from a real loopback server through the
real SDK, the GIANT agent and the runner's result row; a body lacking the list altogether is malformed.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pandas as pd
import pytest

from giant_assets.agents.pricing import ModelPrice, PriceTable
from giant_assets.agents.providers import MalformedResponse, Message
from giant_assets.agents.providers.factory import model_class
from giant_assets.agents.registry import make_agent
from giant_assets.demo.scripted import Reply, ScriptedModelServer
from giant_assets.experiments.spec import Experiment
from giant_assets.runs.agent_api import AgentItem
from giant_assets.runs.records import AGENT_ERROR, NO_ANSWER
from giant_assets.runs.runner import result_row
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.support.slides import write_pyramidal_slide

IN, OUT = 11, 7  # the tokens each empty reply reports (billed, so counted)

# (provider, api, the body of an empty reply, the same body lacking its list of outputs)
WIRES = {
    "chat": (
        "openai",
        "chat",
        {"id": "c", "object": "chat.completion", "created": 1, "model": "m", "choices": [],
         "usage": {"prompt_tokens": IN, "completion_tokens": OUT, "total_tokens": IN + OUT}},
        {"id": "c", "object": "chat.completion", "created": 1, "model": "m"},
    ),
    "responses": (
        "openai",
        "responses",
        {"id": "r", "object": "response", "created_at": 1, "model": "m", "status": "completed", "output": [],
         "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
         "usage": {"input_tokens": IN, "output_tokens": OUT, "total_tokens": IN + OUT}},
        {"id": "r", "object": "response", "created_at": 1, "model": "m", "status": "completed"},
    ),
    "messages": (
        "anthropic",
        "messages",
        {"id": "a", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
         "content": [], "usage": {"input_tokens": IN, "output_tokens": OUT}},
        {"id": "a", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
         "usage": {"input_tokens": IN, "output_tokens": OUT}},
    ),
    # Gemini's JSON leaves an empty list out: no "candidates" is the empty reply (there is no lacking one)
    "gemini": (
        "gemini",
        None,
        {"usageMetadata": {"promptTokenCount": IN, "candidatesTokenCount": OUT}},
        None,
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def slide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(tmp_path_factory.mktemp("empty") / "slide.tiff", ONE_LESION_DESIGN, levels=3)


def served(server: ScriptedModelServer, provider: str) -> str:
    return server.openai_base_url if provider == "openai" else server.base_url


@pytest.mark.parametrize("wire", list(WIRES))
def test_an_empty_reply_is_an_empty_answer_with_its_tokens(wire: str) -> None:
    provider, api, empty, lacking = WIRES[wire]
    bodies = [empty] + ([lacking] if lacking else [])
    with ScriptedModelServer([Reply(body=json.dumps(b).encode()) for b in bodies]) as server:
        model = model_class(api or "gemini", provider)("m", base_url=served(server, provider), api_key_env="")

        async def go() -> None:
            try:
                reply = await model.complete([Message.user("Which organ?")])
                assert (reply.text, reply.tool_calls) == ("", ())
                assert (reply.usage.input_tokens, reply.usage.output_tokens) == (IN, OUT)
                if lacking:
                    with pytest.raises(MalformedResponse, match="lacks what was expected"):
                        await model.complete([Message.user("Which organ?")])
            finally:
                await model.aclose()

        asyncio.run(go())
    assert len(server.requests) == len(bodies)


@pytest.mark.parametrize("wire", list(WIRES))
def test_an_empty_final_reply_is_scored_wrong_not_a_failed_run(wire: str, slide: Path) -> None:
    """The GIANT agent's reply without a tool call is its answer: empty, it is ``no_answer`` in the row."""
    provider, api, empty, _ = WIRES[wire]
    with ScriptedModelServer([Reply(body=json.dumps(empty).encode())]) as server:
        exp = Experiment(
            name="empty", agent="giant", provider=provider, model="m", base_url=served(server, provider),
            max_steps=3, reasoning_effort=None, **({"api": api} if api else {}),
        )  # fmt: skip
        agent = make_agent(exp, pd.DataFrame(), None)
        agent.prices = PriceTable({"m": ModelPrice(1.0, 1.0)})
        item = {
            "benchmark_name": "gtex", "benchmark_id": "1", "question": "Which organ?",
            "options": ["Lung", "Liver", "Kidney"], "truth_label": 2, "wsi_path": str(slide),
        }  # fmt: skip

        async def go():
            try:
                return await agent.answer(
                    AgentItem("gtex", "1", item["question"], item["options"], str(slide)), 0
                )
            finally:
                await agent.aclose()

        answer = asyncio.run(go())
    assert answer.error is None and answer.text == "" and len(server.requests) == 1
    kind = (answer.error_kind or AGENT_ERROR) if answer.error else None  # as the runner decides
    base = {"config_hash": "h", "agent": "giant", "model": "m", "benchmark_name": "gtex", "benchmark_id": "1"}
    row = result_row(base | {"run_index": 0}, item, answer, kind, answer.error)
    assert (row["error_kind"], row["predicted_label"], row["correct"]) == (NO_ANSWER, None, False)
    assert row["extraction"] == "empty answer"
    assert (row["input_tokens"], row["output_tokens"]) == (IN, OUT)
