"""Open models on local OpenAI-compatible servers (``server: vllm|sglang|ollama|llamacpp``): the GIANT
loop over a real generated slide, through the real OpenAI SDK, against a loopback server with those
servers' quirks (tests/support/local_servers.py). Each quirk is first shown to break the plain chat
client, then the preset runs the protocol through it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from giant_assets.agents.estimate import estimate
from giant_assets.agents.giant import GiantAgent
from giant_assets.agents.pricing import load_price_table
from giant_assets.agents.providers import ImagePart, Message, OpenAIChatModel, TextPart, ToolSpec
from giant_assets.agents.providers.local import LocalChatModel, keep_images, text_tool_calls
from giant_assets.agents.registry import make_agent
from giant_assets.demo.scripted import ScriptedModelServer, demo_policy
from giant_assets.experiments.declared import load_experiments
from giant_assets.experiments.spec import Experiment
from giant_assets.runs.agent_api import AgentAnswer, AgentItem
from giant_assets.slides.access import encode_image
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.support.local_servers import PLAIN_ANSWER, Quirks, navigate, prompt_tokens, quirks
from tests.support.slides import write_pyramidal_slide

REPO = Path(__file__).resolve().parents[2]
PROMPT = 'Which organ?\n1. Lung\n2. Liver\n3. Skin\nAnswer as JSON {"answer": N}.'
CROPS = [(0, 0, 2048, 1536), (2048, 0, 2048, 1536), (0, 1536, 2048, 1536), (2048, 1536, 2048, 1536),
         (1024, 768, 2048, 1536)]  # fmt: skip


@pytest.fixture(scope="module")
def slide_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(tmp_path_factory.mktemp("local") / "slide.tiff", ONE_LESION_DESIGN, levels=4)


def item(path: Path) -> AgentItem:
    return AgentItem("tcga", "item-1", PROMPT, ["Lung", "Liver", "Skin"], str(path))


def run(agent: GiantAgent, slide: Path) -> AgentAnswer:
    async def go() -> AgentAnswer:
        try:
            return await agent.answer(item(slide), 0)
        finally:
            await agent.aclose()

    return asyncio.run(go())


def local_agent(srv: ScriptedModelServer, **fields) -> GiantAgent:
    """The GIANT agent an experiment with ``server`` builds (factory and registry as a run uses them)."""
    fields = {"server": "vllm", "max_steps": 8, "image_size": 560} | fields
    exp = Experiment(name="q", agent="giant", model="Qwen/Qwen3-VL-8B-Instruct", base_url=srv.openai_base_url,
                     **fields)  # fmt: skip
    agent = make_agent(exp, pd.DataFrame(), None)
    assert isinstance(agent.chat, LocalChatModel)
    return agent


def plain_agent(srv: ScriptedModelServer, **kwargs) -> GiantAgent:
    """The agent over the hosted-OpenAI chat client, as ``api: chat`` with a loopback base_url was before."""
    chat = OpenAIChatModel("Qwen/Qwen3-VL-8B-Instruct", base_url=srv.openai_base_url, reasoning_effort="high")
    return GiantAgent(chat, max_steps=8, image_size=560, **kwargs)


def crops_served(ans: AgentAnswer) -> list[list[int] | None]:
    return [s.box for s in ans.steps if s.action == "crop"]


# ---------------------------------------------------------------- tool calls written in the text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Qwen / Hermes: a block per call, arguments an object
        ('Zooming.\n<tool_call>\n{"name": "slide_zoom", "arguments": {"x0": 1, "y0": 2, "w": 3, "h": 4}}\n'
         "</tool_call>", [("slide_zoom", {"x0": 1, "y0": 2, "w": 3, "h": 4})]),
        # two blocks, arguments as a JSON string (as some templates write them), the last one unclosed
        ('<tool_call>{"name": "slide_zoom", '
         '"arguments": "{\\"x0\\": 5, \\"y0\\": 6, \\"w\\": 7, \\"h\\": 8}"}</tool_call>'
         '<tool_call>{"name": "note", "arguments": {"observation": "glands"}}',
         [("slide_zoom", {"x0": 5, "y0": 6, "w": 7, "h": 8}), ("note", {"observation": "glands"})]),
        # a bare JSON object naming an offered tool, in a code fence; Llama's "parameters" too
        ('I will look.\n```json\n{"name": "slide_zoom", "arguments": {"x0": 9, "y0": 9, "w": 9, "h": 9}}'
         '\n```',
         [("slide_zoom", {"x0": 9, "y0": 9, "w": 9, "h": 9})]),
        ('{"type": "function", "name": "slide_zoom", "parameters": {"x0": 0, "y0": 0, "w": 1, "h": 1}}',
         [("slide_zoom", {"x0": 0, "y0": 0, "w": 1, "h": 1})]),
        # not calls: a final answer's JSON, a bare object naming a tool not offered, plain prose
        ('<report>glands</report><response>{"answer": 2}</response>', []),
        ('{"name": "rm_rf", "arguments": {}}', []),
        (PLAIN_ANSWER, []),
    ],
)  # fmt: skip
def test_tool_calls_read_from_the_text(text: str, expected: list) -> None:
    calls = text_tool_calls(text, {"slide_zoom", "note"})
    assert [(c.name, c.arguments) for c in calls] == expected
    assert len({c.id for c in calls}) == len(calls)
    assert all(json.loads(c.raw_arguments) == c.arguments for c in calls)


@pytest.mark.parametrize("form", ["hermes", "json"])
def test_calls_and_answer_in_plain_text_are_served_and_extracted(slide_path: Path, form: str) -> None:
    """No tool-call parser on the server: the calls come back in the content; the answer untagged."""
    rule = quirks(navigate(CROPS[:2]), Quirks(calls_in_text=form))
    with ScriptedModelServer(rule=rule) as srv:
        old = run(plain_agent(srv), slide_path)
        assert crops_served(old) == [] and len(srv.requests) == 1  # read as the final answer at step 1
        ans = run(local_agent(srv), slide_path)
    assert ans.error is None and crops_served(ans) == [list(CROPS[0]), list(CROPS[1])]
    assert ans.text == PLAIN_ANSWER and not ans.response_tagged
    last = srv.requests[-1]
    assert len(last.images) == 3  # the overview and both crops were shown
    # the call goes back as the model wrote it, answered by a tool result naming the region
    assistant = [t for t in last.turns if t.role == "assistant"]
    assert "slide_zoom" in assistant[0].texts[0] and assistant[0].tool_calls[0][0] == "slide_zoom"
    assert any(t.role == "tool" and "(0,0)" in t.texts[0] for t in last.turns)


# ---------------------------------------------------------------- request parameters


def test_no_reasoning_no_detail_no_unknown_parameter(slide_path: Path) -> None:
    """A server that refuses unknown parameters: the hosted client's reasoning_effort is a 400."""
    rule = quirks(navigate(CROPS[:1]), Quirks(strict_params=True))
    with ScriptedModelServer(rule=rule) as srv:
        old = run(plain_agent(srv), slide_path)
        assert old.error and "reasoning_effort" in old.error and srv.requests[0].json["reasoning_effort"]
        n_old = len(srv.requests)
        # the experiment's reasoning_effort (default high) is not sent; max_tokens is the servers' name
        ans = run(local_agent(srv, reasoning_effort="high"), slide_path)
        sent = [r.json for r in srv.requests[n_old:]]
    assert ans.error is None and len(sent) == 2 and crops_served(ans) == [list(CROPS[0])]
    assert all(set(body) <= {"model", "messages", "tools", "tool_choice"} for body in sent)
    assert all(body["tool_choice"] == "auto" for body in sent)
    parts = [p for m in sent[1]["messages"] if isinstance(m["content"], list) for p in m["content"]]
    images = [p["image_url"] for p in parts if p["type"] == "image_url"]
    assert len(images) == 2 and all(set(i) == {"url"} for i in images)


def test_server_that_needs_tool_choice(slide_path: Path) -> None:
    """Without tool_choice auto (vLLM < 0.8's default none) the model never zooms."""
    rule = quirks(navigate(CROPS[:2]), Quirks(needs_tool_choice=True))
    with ScriptedModelServer(rule=rule) as srv:
        old = run(plain_agent(srv), slide_path)
        ans = run(local_agent(srv), slide_path)
    assert crops_served(old) == [] and old.text == PLAIN_ANSWER
    assert crops_served(ans) == [list(CROPS[0]), list(CROPS[1])] and ans.response_tagged


# ---------------------------------------------------------------- images per request and context length


def test_never_more_images_than_the_server_takes(slide_path: Path) -> None:
    """vLLM --limit-mm-per-prompt image=3: a fourth image is a 400. server_image_limit: 3 keeps the
    overview and the two newest crops in every request, and tells the model in the system prompt."""
    rule = quirks(navigate(CROPS), Quirks(max_images=3))
    with ScriptedModelServer(rule=rule) as srv:
        old = run(plain_agent(srv), slide_path)
        assert old.error and "At most 3 image(s)" in old.error and len(crops_served(old)) == 3
        n_old = len(srv.requests)
        ans = run(local_agent(srv, server="vllm", server_image_limit=3), slide_path)
        sent = srv.requests[n_old:]
    assert ans.error is None and crops_served(ans) == [list(c) for c in CROPS]
    assert len(sent) == len(CROPS) + 1 and max(len(r.images) for r in sent) == 3
    overview = sent[0].images[0].tobytes()
    assert all(r.images[0].tobytes() == overview for r in sent)  # the overview always stays
    # the last request shows the two newest crops: level-0 boxes 4 and 5, at their shown sizes
    assert [im.size for im in sent[-1].images[1:]] == [
        tuple(s.image_size) for s in ans.steps if s.action == "crop"
    ][-2:]
    assert "only the 2 most recently zoomed images" in sent[0].turns[0].texts[0]


def test_the_provider_caps_images_whatever_the_agent_sends() -> None:
    """The client's own cap: four images handed to it, the first and the two newest sent, the other noted."""
    img = encode_image(Image.new("RGB", (64, 48), "white"), "JPEG")
    parts = [ImagePart(img, label=f"view {n}") for n in range(4)]
    messages = [Message.system("s"), *(Message.user(TextPart(f"t{n}"), p) for n, p in enumerate(parts))]
    with ScriptedModelServer(rule=quirks(navigate([]), Quirks(max_images=3))) as srv:
        chat = LocalChatModel("m", base_url=srv.openai_base_url, max_images=3)
        reply = asyncio.run(_complete(chat, messages))
    assert reply.text and len(srv.requests[0].images) == 3
    assert "[view 1: image removed from the context]" in srv.requests[0].text
    assert [m.images[0].label if m.images else None for m in keep_images(messages, 2)] == [
        None,
        "view 0",
        None,
        None,
        "view 3",
    ]


async def _complete(chat: LocalChatModel, messages: list[Message]):
    try:
        return await chat.complete(messages, (ToolSpec("slide_zoom", "zoom", {"type": "object"}),))
    finally:
        await chat.aclose()


def test_prompt_over_the_context_length_is_sent_again_with_fewer_images(slide_path: Path) -> None:
    """A 400 naming the context length: the oldest crop leaves (never the overview) until it fits."""
    limit = 1900
    rule = quirks(navigate(CROPS), Quirks(context_tokens=limit))
    with ScriptedModelServer(rule=rule) as srv:
        old = run(plain_agent(srv), slide_path)
        assert old.error and "maximum context length is 1900" in old.error
        n_old = len(srv.requests)
        ans = run(local_agent(srv, server="vllm"), slide_path)
        sent = srv.requests[n_old:]
    assert ans.error is None and crops_served(ans) == [list(c) for c in CROPS]
    accepted = [r for r in sent if prompt_tokens(r) <= limit]
    refused = [r for r in sent if prompt_tokens(r) > limit]
    assert len(accepted) == len(CROPS) + 1 and refused  # every step answered, some after a refusal
    overview = sent[0].images[0].tobytes()
    assert all(r.images[0].tobytes() == overview for r in sent)
    assert max(len(r.images) for r in accepted) < len(CROPS) + 1


# ---------------------------------------------------------------- the declared examples


EXAMPLES = [
    ("vllm-qwen3vl-giant", "vllm", "http://127.0.0.1:8000/v1"),
    ("ollama-qwen3vl-giant", "ollama", "http://127.0.0.1:11434/v1"),
]


@pytest.mark.parametrize(("name", "server", "url"), EXAMPLES)
def test_declared_examples_run_the_released_protocol(
    slide_path: Path, name: str, server: str, url: str
) -> None:
    """experiments.yaml's examples, only the URL changed (to the loopback quirks server): the released
    protocol (20 steps, tools, the built-in prompts) through every quirk of a local server at once."""
    exp = load_experiments(REPO / "experiments.yaml")[name]
    assert (exp.server, exp.resolved_base_url, exp.agent, exp.max_steps) == (server, url, "giant", 20)
    q = Quirks(max_images=exp.server_image_limit, strict_params=True, needs_tool_choice=True)
    with ScriptedModelServer(rule=quirks(navigate(CROPS), q)) as srv:
        agent = make_agent(exp.model_copy(update={"base_url": srv.openai_base_url}), pd.DataFrame(), None)
        ans = run(agent, slide_path)
    assert ans.error is None and crops_served(ans) == [list(c) for c in CROPS] and ans.response_tagged
    assert all(len(r.images) <= (exp.server_image_limit or 99) for r in srv.requests)


def test_giant_run_with_a_server(slide_path: Path, tmp_path: Path) -> None:
    """``giant-run --server vllm``: every quirk at once, calls in the text, two images per request."""
    q = Quirks(max_images=2, strict_params=True, needs_tool_choice=True, calls_in_text="hermes")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["OPENAI_API_KEY"] = "sk-hosted-SECRET-must-not-reach-the-local-server"
    with ScriptedModelServer(rule=quirks(navigate(CROPS[:3]), q)) as srv:
        result = subprocess.run(
            [str(Path(sys.executable).parent / "giant-run"), str(slide_path),
             "--question", "Which organ?", "--options", "Lung", "Liver", "Skin",
             "--provider", "openai", "--server", "vllm", "--server-image-limit", "2",
             "--model", "Qwen/Qwen3-VL-8B-Instruct", "--base-url", srv.openai_base_url, "--image-size", "560",
             "--out", str(tmp_path / "t.json")],
            capture_output=True, text=True, env=env, timeout=120, check=False,
        )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip().splitlines()[-1] == "label: 2"  # "... the answer is 2." read from plain text
    steps = json.loads((tmp_path / "t.json").read_text())["steps"]
    assert [s["box"] for s in steps if s["action"] == "crop"] == [list(c) for c in CROPS[:3]]
    assert len(srv.requests) == 4 and max(len(r.images) for r in srv.requests) == 2
    assert all("authorization" not in r.headers for r in srv.requests)  # no key sent, not OpenAI's


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"server": "vllm", "provider": "anthropic"}, "server 'vllm' speaks Chat Completions"),
        ({"server": "ollama", "api": "responses"}, "server 'ollama' speaks Chat Completions"),
        ({"server": "vllm", "batch": True}, "server 'vllm' has no batch API"),
        ({"server_image_limit": 4}, "server_image_limit and send_detail apply to a local server"),
        ({"server": "sglang", "server_image_limit": 0}, "greater than or equal to 1"),
    ],
)
def test_incoherent_server_settings_are_refused(fields: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Experiment(name="x", agent="giant", model="m", **fields)


def test_server_settings_in_the_hash() -> None:
    """The server's settings decide answers; hosted experiments keep the hash they had before them."""
    hosted = Experiment(name="g", agent="giant", model="m")
    assert not {"server", "server_image_limit", "send_detail"} & set(hosted.answer_settings())
    base = Experiment(name="v", agent="giant", model="m", server="vllm")
    assert base.config_hash() != hosted.config_hash()
    # reasoning is not sent to a server, so it does not split its result sets
    assert base.model_copy(update={"reasoning_effort": "low"}).config_hash() == base.config_hash()
    # the image limit is hashed as the pruning it causes: limit 5 == max_images_in_context 5
    limited = Experiment(name="v", agent="giant", model="m", server="vllm", server_image_limit=5)
    pruned = Experiment(name="v", agent="giant", model="m", server="vllm", max_images_in_context=5)
    assert limited.resolved_max_images_in_context == 5 and limited.config_hash() != base.config_hash()
    assert (
        limited.answer_settings()["max_images_in_context"]
        == pruned.answer_settings()["max_images_in_context"]
    )
    # the default address is the one hashed: writing it out changes nothing
    explicit = base.model_copy(update={"base_url": "http://127.0.0.1:8000/v1"})
    assert explicit.config_hash() == base.config_hash()


def test_estimate_counts_no_reasoning_and_the_image_limit() -> None:
    """``giant-experiments estimate``: a server's run is estimated as what is sent to it."""
    prices = load_price_table()
    local = Experiment(name="v", agent="giant", model="m", server="vllm", server_image_limit=5)
    # the same requests to a hosted model: no reasoning, the same pruning
    same = Experiment(name="h", agent="giant", model="m", reasoning_effort=None, max_images_in_context=5)
    a, b = (estimate(e, "tcga", items=10, prices=prices) for e in (local, same))
    assert (a.output_tokens, a.input_tokens, a.cached_tokens) == (
        b.output_tokens,
        b.input_tokens,
        b.cached_tokens,
    )
    unpruned = estimate(
        local.model_copy(update={"server_image_limit": None}), "tcga", items=10, prices=prices
    )
    assert a.input_tokens.high < unpruned.input_tokens.high


def test_json_protocol_for_a_model_without_tools(slide_path: Path) -> None:
    """Qwen2.5-VL's template renders no tools: ``protocol: json`` sends none (so no tool_choice either)
    and reads the free-JSON crop and answer from the text, through a strict server."""
    rule = quirks(demo_policy, Quirks(max_images=2, strict_params=True))
    with ScriptedModelServer(rule=rule) as srv:
        ans = run(local_agent(srv, server="ollama", protocol="json", server_image_limit=2), slide_path)
    assert ans.error is None and len(crops_served(ans)) == 1 and ans.text in {"1", "2", "3"}
    assert all("tools" not in r.json and "tool_choice" not in r.json for r in srv.requests)
    assert [len(r.images) for r in srv.requests] == [1, 2]
