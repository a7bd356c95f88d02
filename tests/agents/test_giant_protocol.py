"""What the GIANT agent sends, step by step, as the official agents do: checked at the loopback model
server, which records every request, for each wire format (Responses, Chat Completions, Messages).

The official behaviour (KianWeihrauch/GIANT, read side by side): the system prompt states the slide's
level-0 size and the step budget; the first user turn is the question and the overview, nothing else;
a tool result is the region's reminder with the function calls left (T - step - 1) and the crop; the GPT
agent serves every call of a reply, the Claude agent only the first; with T = 1 no tool is offered and
the single-step prompt is sent; the note tool's notes follow every later crop; pruning keeps the overview.
"""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pandas as pd
import pytest

from giant_assets.agents.giant import GiantAgent
from giant_assets.agents.pricing import ModelPrice, PriceTable
from giant_assets.agents.registry import make_agent
from giant_assets.demo.scripted import Reply, ScriptedModelServer, answer_reply, crop_reply
from giant_assets.experiments.prompts import BUILT_IN
from giant_assets.experiments.spec import Experiment
from giant_assets.runs.agent_api import AgentAnswer, AgentItem
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.support.slides import write_pyramidal_slide

PRICES = PriceTable({"scripted-vlm": ModelPrice(input_per_mtok=1.0, output_per_mtok=1.0)})
QUESTION = 'Which organ?\n1. Lung\n2. Liver\n3. Skin\nAnswer as JSON {"answer": N}.'
ZOOM_A = {"x0": 0, "y0": 0, "w": 1024, "h": 1024}
ZOOM_B = {"x0": 2048, "y0": 1024, "w": 512, "h": 512}
PROVIDER = {"responses": "openai", "chat": "openai", "messages": "anthropic"}


@pytest.fixture(scope="module")
def slide_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(tmp_path_factory.mktemp("proto") / "slide.tiff", ONE_LESION_DESIGN, levels=4)


def agent_from(srv: ScriptedModelServer, api: str, **fields) -> GiantAgent:
    """The agent an experiment declares (``registry.make_agent``), pointed at the loopback server."""
    base = srv.base_url if api == "messages" else srv.openai_base_url
    exp = Experiment(
        name="proto", agent="giant", provider=PROVIDER[api], api=api, model="scripted-vlm", base_url=base,
        reasoning_effort=None, thinking_budget=0, **fields,
    )  # fmt: skip
    agent = make_agent(exp, pd.DataFrame(), None)
    agent.prices = PRICES
    return agent


def run(agent: GiantAgent, slide: Path) -> AgentAnswer:
    async def go():
        try:
            return await agent.answer(AgentItem("tcga", "1", QUESTION, None, str(slide)), 0)
        finally:
            await agent.aclose()

    return asyncio.run(go())


def reminder(zoom: dict, calls_left: int) -> str:
    """The tool-result text, written out here as the official f-string builds it (built-in words)."""
    return (
        f"This is the region whose top-left corner is at ({zoom['x0']},{zoom['y0']}), "
        f"{zoom['w']}×{zoom['h']} pixels in size. Note: the slide is 4096 × 3072 pixels at full "
        f"resolution, and every coordinate refers to that resolution. Function calls left: {calls_left}."
    )


@pytest.mark.parametrize(
    ("api", "serve_calls", "served"),
    [
        ("responses", None, "all"),  # the official GPT agent serves every call of a reply
        ("chat", None, "all"),
        ("messages", None, "first"),  # the official Claude agent only the first
        ("responses", "first", "first"),  # overridden
        ("messages", "all", "all"),
    ],
)
def test_what_is_sent_step_by_step(slide_path: Path, api: str, serve_calls: str | None, served: str) -> None:
    script = [Reply("Two places.", calls=(("slide_zoom", ZOOM_A), ("slide_zoom", ZOOM_B))), answer_reply("2")]
    with ScriptedModelServer(script) as srv:
        ans = run(agent_from(srv, api, serve_calls=serve_calls), slide_path)
    assert ans.error is None and len(srv.requests) == 2
    first, second = srv.requests
    # the system prompt: level-0 size, T and T-1, the report/response structure; one-call rule if "first"
    (system,) = [t.texts[0] for t in first.turns if t.role == "system"]
    assert "4096 × 3072 pixels" in system and "20 steps in all" in system and "up to 19 of them" in system
    assert "as many of your steps as you can" in system and "<report>" in system and "<response>" in system
    assert ("ONE TOOL CALL PER TURN" in system) == (served == "first")
    # the first user turn: the question and the overview, nothing else
    user = [t for t in first.turns if t.role == "user"]
    assert len(user) == 1 and user[0].texts == (QUESTION,) and len(user[0].images) == 1
    assert first.tools == second.tools == ["slide_zoom"]
    # the tool results: the official reminder (T=20, step 1: 20 - 1 - 1 = 18 calls left) with the crop
    results = [t for t in second.turns if t.role == "tool"]
    assert len(results) == 2 and results[0].texts == (reminder(ZOOM_A, 18),)
    crops = second.images[1:]
    if served == "all":
        assert results[1].texts == (reminder(ZOOM_B, 18),) and len(crops) == 2
        assert [s.action for s in ans.steps] == ["thumbnail", "crop", "crop", "answer"]
        assert ans.steps[2].box == [2048, 1024, 512, 512] and ans.steps[2].input_tokens == 0
    else:
        assert results[1].texts == (BUILT_IN.extra_call_ignored,) and len(crops) == 1
        assert [s.action for s in ans.steps] == ["thumbnail", "crop", "answer"]
    assert ans.steps[1].box == [0, 0, 1024, 1024]
    assert max(crops[0].size) == (1000 if api != "messages" else 500)
    if api == "chat":  # a tool message carries text only on this wire: the crops follow in one user turn
        assert [t.role for t in second.turns][-3:] == ["tool", "tool", "user"]


def test_an_unknown_tool_is_answered_with_an_error(slide_path: Path) -> None:
    script = [Reply("?", calls=(("note", {"observation": "x"}), ("magnify", {"x": 1}))), answer_reply("1")]
    with ScriptedModelServer(script) as srv:
        ans = run(agent_from(srv, "messages", serve_calls="all"), slide_path)  # note_tool is off
    told = [t.texts[0] for t in srv.requests[1].turns if t.role == "tool"]
    assert told == [
        "Error: there is no tool 'note'; call slide_zoom(x0, y0, w, h) with integers",
        "Error: there is no tool 'magnify'; call slide_zoom(x0, y0, w, h) with integers",
    ]
    assert ans.error is None and "unusable tool call magnify" in ans.steps[2].error


@pytest.mark.parametrize("api", ["responses", "messages"])
def test_single_step_offers_no_tool(slide_path: Path, api: str) -> None:
    with ScriptedModelServer([Reply("<report>Liver lobules.</report><response>2</response>")]) as srv:
        ans = run(agent_from(srv, api, max_steps=1), slide_path)
    (request,) = srv.requests
    assert "tools" not in request.json and ans.error is None and ans.text == "2" and ans.response_tagged
    (system,) = [t.texts[0] for t in request.turns if t.role == "system"]
    assert system == BUILT_IN.single_step and "slide_zoom" not in system
    assert [t.texts for t in request.turns if t.role == "user"] == [(QUESTION,)]


def test_note_tool_notes_follow_and_pruning_keeps_the_overview(slide_path: Path) -> None:
    """note_tool + max_images_in_context=2: the overview and the newest crop stay; the older crop's
    image leaves but its text stays; every crop after a note lists the notes."""
    script = [
        Reply("Noting.", calls=(("note", {"observation": "dense nuclei, upper left"}),)),
        crop_reply(*ZOOM_A.values()),
        crop_reply(*ZOOM_B.values()),
        answer_reply("1"),
    ]
    with ScriptedModelServer(script) as srv:
        ans = run(agent_from(srv, "responses", note_tool=True, max_images_in_context=2), slide_path)
    assert ans.error is None
    assert [s.action for s in ans.steps] == ["thumbnail", "note", "crop", "crop", "answer"]
    assert ans.steps[1].note == "dense nuclei, upper left"
    assert all(r.tools == ["slide_zoom", "note"] for r in srv.requests)
    system = srv.requests[0].turns[0].texts[0]
    assert "only the 1 most recently zoomed" in system and "'note' tool" in system
    assert "notes are the only way" in system and "what your recorded notes say" in system
    tools = [t for t in srv.requests[3].turns if t.role == "tool"]
    notes = "\n\nYour notes so far (1):\n1. dense nuclei, upper left\n"
    assert [t.texts for t in tools] == [
        ("Noted: dense nuclei, upper left",),
        (reminder(ZOOM_A, 17) + notes,),  # text kept after its image left the context
        (reminder(ZOOM_B, 16) + notes,),
    ]
    # images per request: overview; overview; overview + A; overview + B (A pruned, not the overview)
    assert [len(r.images) for r in srv.requests] == [1, 1, 2, 2]
    overview = srv.requests[0].turns[1].images[0]
    assert srv.requests[3].turns[1].images[0] == overview and tools[1].images == ()
    assert tools[2].images and _png_size(tools[2].images[0]) == (512, 512)


def test_attempt_timeout_is_per_attempt_not_per_item(slide_path: Path) -> None:
    """Each attempt has its own limit: two attempts of ~0.6 s pass a 1.5 s limit (1.2 s together);
    one slow call ends the run with error kind ``timeout``."""
    slow = 0.3
    script = [
        Reply("a", crop=(0, 0, 512, 512), delay_s=slow),
        Reply("b", crop=(0, 0, 512, 512), delay_s=slow),  # a tool call at step T = 2: attempt 2
        Reply("c", crop=(0, 0, 512, 512), delay_s=slow),
        Reply("d", answer="1", delay_s=slow),
    ]
    with ScriptedModelServer(script) as srv:
        ans = run(agent_from(srv, "responses", max_steps=2, attempt_timeout_s=1.5), slide_path)
    assert ans.error is None and ans.attempts == 2 and len(srv.requests) == 4
    assert sum(r.latency_s for r in (s for s in ans.steps if s.action != "thumbnail")) >= 4 * slow
    with ScriptedModelServer([Reply("late", answer="1", delay_s=2.0)]) as srv:
        ans = run(agent_from(srv, "responses", attempt_timeout_s=0.5), slide_path)
    assert ans.error_kind == "timeout" and "attempt 1 took longer than attempt_timeout_s = 0.5 s" in ans.error


def _png_size(data: bytes) -> tuple[int, int]:
    from PIL import Image

    return Image.open(io.BytesIO(data)).size


def test_batch_mode_has_no_attempt_limit() -> None:
    """A batch round may take hours: the per-attempt limit is off there, as the whole-run one is."""
    exp = Experiment(name="b", agent="giant", model="scripted-vlm", base_url="http://127.0.0.1:9/v1")
    assert make_agent(exp, pd.DataFrame(), None).attempt_timeout_s == 900.0
    batched = exp.model_copy(update={"batch": True})
    assert make_agent(batched, pd.DataFrame(), None).attempt_timeout_s is None
