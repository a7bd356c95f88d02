"""The thumbnail, patch and random-region baselines over ``provider: azure``, request by request, against
what the official code (KianWeihrauch/GIANT ``scripts/run_benchmark.py`` and
``pathology_agent_streaming_image_tool_manual_context_random_patch.py``, with ``util.py``'s crop) sends
for the same item, at the recording loopback server's Azure route.

The official baselines reach GPT through ``AzureOpenAI(api_version="2025-03-01-preview")`` and
``client.responses.create``: the thumbnail and each patch as one user message (``input_text`` with the
benchmark script's prompt, ``input_image`` with a JPEG data URL, no ``detail``), ``reasoning: {effort:
high, summary: detailed}``, nothing else (no ``max_output_tokens``, no temperature, no instructions);
the thumbnail is ``get_thumbnail((1024, 1024))``, a patch ``read_region(.., 0, (224, 224))`` converted
to RGB, both saved as JPEG with Pillow's defaults. The random-region agent sends a system message, the
user message with the guided overview (no ``detail``), the one argument-less tool, the same reasoning,
and each region back as a ``function_call_output`` of a text and the guided crop at ``detail: high``.
The expected requests below are written from reading that code (the Azure wire per
https://learn.microsoft.com/en-us/Azure/foundry-classic/openai/how-to/responses: ``POST
{endpoint}/openai/responses?api-version=...``, the deployment in ``model``, the key in ``api-key``);
the two wire-only differences (``store: false`` with ``include``, ``prompt_cache_key``) are rows of
docs/agent-protocol.md's table, as are the texts in the platform's words and ``strict: false``.
"""

from __future__ import annotations

import asyncio
import base64
import io
from pathlib import Path

import openslide
import pandas as pd
import pytest
from PIL import Image

from giant_assets.agents.registry import make_agent
from giant_assets.demo.scripted import Reply, ScriptedModelServer, answer_reply
from giant_assets.experiments.spec import Experiment
from giant_assets.runs.agent_api import AgentAnswer
from giant_assets.runs.runner import agent_item
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.agents.test_official_requests import OPTIONS, item_row, official_options, official_view
from tests.support.slides import write_pyramidal_slide

KEY = "azure-key-SECRET-0123456789abcdef0123456789"
DEPLOYMENT = "my-gpt5-deployment"
TEMPLATE = 'Which grade?\n\nSelect from the following options:\n{options}\n\nAnswer ```{{"answer": N}}```\n'
REASONING = {"effort": "high", "summary": "detailed"}  # every official Azure call
# wire-only additions of ours, each a row of docs/agent-protocol.md's table
WIRE_ONLY = {"store": False, "include": ["reasoning.encrypted_content"]}


@pytest.fixture(scope="module")
def slide_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(tmp_path_factory.mktemp("azure") / "s.tiff", ONE_LESION_DESIGN, levels=4)


def run(srv: ScriptedModelServer, agent: str, slide: Path, monkeypatch: pytest.MonkeyPatch, **fields):
    """Our baseline, declared with its defaults over Azure at ``srv``, on one tcga item."""
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    exp = Experiment(
        name="b", agent=agent, provider="azure", azure_endpoint=srv.base_url, model="gpt-5",
        deployment=DEPLOYMENT, **fields,
    )  # fmt: skip
    made = make_agent(exp, pd.DataFrame(), None)
    item = agent_item(item_row(slide, "tcga", TEMPLATE, OPTIONS))

    async def go() -> AgentAnswer:
        try:
            return await made.answer(item, 0)
        finally:
            await made.aclose()

    answer = asyncio.run(go())
    assert answer.error is None, answer.error
    return answer


def data_url(image) -> str:
    """``image_to_data_url`` / ``crop_to_data_url``: JPEG with Pillow's defaults, base64, data URL."""
    buf = io.BytesIO()
    image.save(buf, format="JPEG")
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()


def official_level(slide: Path, box: tuple[int, int, int, int], target: int) -> int:
    """``util.crop_to_image``'s level: the best level for 0.85 x the wanted downsample, one finer when
    that renders below the target."""
    with openslide.OpenSlide(str(slide)) as s:
        level = s.get_best_level_for_downsample(max(1.0, max(box[2:]) / target * 0.85))
        down = float(s.level_downsamples[level])
        if max(round(box[2] / down), round(box[3] / down)) < target and level > 0:
            level -= 1
    return level


def view_url(slide: Path, box: tuple[int, int, int, int], target: int) -> str:
    """``util.crop_to_image_with_guides`` of ``box`` at ``target`` px, as a data URL."""
    view = official_view(slide, box, official_level(slide, box, target), target)
    return "data:image/jpeg;base64," + base64.b64encode(view).decode()


def official_thumbnail(slide: Path, size: int):
    """The benchmark script's thumbnail: ``get_thumbnail`` up to 1024 px, above it ``util.crop_to_image``
    of the whole slide (read at ``round(w / ds)``, RGB, Lanczos down to ``size``; no guides)."""
    with openslide.OpenSlide(str(slide)) as s:
        if size <= 1024:
            return s.get_thumbnail((size, size))
        w, h = s.dimensions
        level = official_level(slide, (0, 0, w, h), size)
        ds = float(s.level_downsamples[level])
        image = s.read_region((0, 0), level, (max(1, round(w / ds)), max(1, round(h / ds)))).convert("RGB")
    if max(image.size) > size:
        scale = size / max(image.size)
        image = image.resize(
            (max(1, round(image.width * scale)), max(1, round(image.height * scale))),
            Image.Resampling.LANCZOS,
        )
    return image


def user_message(text: str, url: str) -> dict:
    return {
        "role": "user",
        "type": "message",
        "content": [{"type": "input_text", "text": text}, {"type": "input_image", "image_url": url}],
    }


def assert_azure_route(srv: ScriptedModelServer) -> None:
    for request in srv.requests:
        assert (request.path, request.query) == ("/openai/responses", {"api-version": "2025-03-01-preview"})
        assert request.headers["api-key"] == KEY and "authorization" not in {
            h.lower() for h in request.headers
        }


PROMPT = TEMPLATE.format(options=official_options(OPTIONS))  # the benchmark script's option lines


@pytest.mark.parametrize("size", [None, 2000])  # the default (1024), and the resolution sweep's above it
def test_thumbnail_request_is_the_official_one(
    slide_path: Path, monkeypatch: pytest.MonkeyPatch, size: int | None
) -> None:
    with ScriptedModelServer([Reply('{"answer": 2}')]) as srv:
        run(srv, "thumbnail", slide_path, monkeypatch, **({"thumbnail_size": size} if size else {}))
    assert_azure_route(srv)
    (request,) = srv.requests
    thumbnail = official_thumbnail(slide_path, size or 1024)
    assert max(thumbnail.size) == (size or 1024)
    assert (
        request.json
        == {
            "input": [user_message(PROMPT, data_url(thumbnail))],
            "model": DEPLOYMENT,
            "reasoning": REASONING,
        }
        | WIRE_ONLY
    )


def test_patch_requests_are_the_official_ones(slide_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One request per patch, each the official patch read of that patch's place (the places: our CLAM
    grid, a documented difference), and nothing else in it."""
    with ScriptedModelServer([Reply('{"answer": 2}')] * 4) as srv:
        answer = run(srv, "patch", slide_path, monkeypatch, n_patches=4)
    assert_azure_route(srv)
    boxes = [s.box for s in answer.steps if s.action == "patch"]
    assert len(boxes) == 4 == len(srv.requests) and all(b[2:] == [224, 224] for b in boxes)
    expected = []
    with openslide.OpenSlide(str(slide_path)) as s:
        for x, y, _, _ in boxes:
            patch = s.read_region((x, y), 0, (224, 224)).convert("RGB")
            expected.append({"input": [user_message(PROMPT, data_url(patch))], "model": DEPLOYMENT,
                             "reasoning": REASONING} | WIRE_ONLY)  # fmt: skip
    key = lambda body: body["input"][0]["content"][1]["image_url"]  # noqa: E731 - concurrent: any order
    assert sorted((r.json for r in srv.requests), key=key) == sorted(expected, key=key)


def test_random_region_requests_are_the_official_ones(
    slide_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Call 1: system, user (prompt, guided overview at 1000 px, no detail), the one tool; call 2 adds
    the region as the official ``function_call_output``: a text and the guided 1000 px crop at high."""
    script = [Reply("Looking.", calls=(("view_random_region", {}),)), answer_reply("2")]
    with ScriptedModelServer(script) as srv:
        answer = run(srv, "random_patch", slide_path, monkeypatch)
    assert_azure_route(srv)
    first, second = (r.json for r in srv.requests)
    with openslide.OpenSlide(str(slide_path)) as s:
        whole = (0, 0, *s.dimensions)
    system, user = first["input"]
    assert (system["role"], system["type"], type(system["content"])) == ("system", "message", str)
    assert user == user_message(PROMPT, view_url(slide_path, whole, 1000))
    (tool,) = first["tools"]
    assert tool.pop("description") and tool == {
        "type": "function", "name": "view_random_region",
        "parameters": {"type": "object", "properties": {}, "required": []},
        "strict": False,  # a row of the table: the official dict has no strict
    }  # fmt: skip
    assert set(first) - {"prompt_cache_key"} == {"input", "model", "tools", "reasoning", *WIRE_ONLY}
    assert (first["model"], first["reasoning"]) == (DEPLOYMENT, REASONING)
    assert {k: first[k] for k in WIRE_ONLY} == WIRE_ONLY
    region = answer.steps[1]
    assert region.box[2] == region.box[3] >= 1000  # a square of at least 1000 level-0 px
    (call,) = [i for i in second["input"] if i.get("type") == "function_call"]
    result = second["input"][-1]
    assert result["type"] == "function_call_output" and result["call_id"] == call["call_id"]
    text, image = result["output"]
    assert text["type"] == "input_text" and text["text"]
    assert image == {
        "type": "input_image",
        "detail": "high",
        "image_url": view_url(slide_path, region.box, 1000),
    }
    assert second["input"][:2] == first["input"] and set(second) == set(first)


# ---- Claude's baselines: the benchmark script's ``call_claude_with_image``


def run_claude(srv: ScriptedModelServer, agent: str, slide: Path, **fields) -> AgentAnswer:
    """Our Claude baseline, declared with its defaults at ``srv`` (Anthropic's route), on one tcga item."""
    exp = Experiment(
        name="c", agent=agent, provider="anthropic", base_url=srv.base_url, model="claude-sonnet-4-5",
        **fields,
    )  # fmt: skip
    made = make_agent(exp, pd.DataFrame(), None)
    item = agent_item(item_row(slide, "tcga", TEMPLATE, OPTIONS))

    async def go() -> AgentAnswer:
        try:
            return await made.answer(item, 0)
        finally:
            await made.aclose()

    answer = asyncio.run(go())
    assert answer.error is None, answer.error
    return answer


def claude_request(image) -> dict:
    """``call_claude_with_image``'s request (``messages.stream``, its final message read): the prompt and
    the JPEG (Pillow's defaults) in one user turn, ``max_tokens=30000``, thinking with 1024 tokens, and
    nothing else: no system prompt, no ``cache_control``."""
    buf = io.BytesIO()
    image.save(buf, format="JPEG")
    source = {"type": "base64", "media_type": "image/jpeg", "data": base64.b64encode(buf.getvalue()).decode()}
    content = [{"type": "text", "text": PROMPT}, {"type": "image", "source": source}]
    return {"model": "claude-sonnet-4-5", "max_tokens": 30000,
            "messages": [{"role": "user", "content": content}],
            "thinking": {"type": "enabled", "budget_tokens": 1024}}  # fmt: skip


def test_claude_thumbnail_request_is_the_official_one_without_a_cache_write(slide_path: Path) -> None:
    """One request per item whose cached prefix no later request shares (the prompt leads it): a
    ``cache_control`` there is only a cache write, billed at 1.25x input and never read. By default the
    official request goes; ``baseline_cache: true`` marks it as before."""
    with ScriptedModelServer([Reply('{"answer": 2}')]) as srv:
        answer = run_claude(srv, "thumbnail", slide_path)
    (request,) = srv.requests
    assert request.json == claude_request(official_thumbnail(slide_path, 1024))
    assert answer.steps[-1].cache_write_tokens == 0
    with ScriptedModelServer([Reply('{"answer": 2}')]) as srv:
        marked = run_claude(srv, "thumbnail", slide_path, baseline_cache=True)
    (request,) = srv.requests
    expected = claude_request(official_thumbnail(slide_path, 1024))
    expected["messages"][0]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    assert request.json == expected
    step = marked.steps[-1]
    assert step.cache_write_tokens == step.input_tokens > 0  # the whole prompt written, nothing read


def test_claude_patch_requests_are_the_official_ones(slide_path: Path) -> None:
    with ScriptedModelServer([Reply('{"answer": 2}')] * 3) as srv:
        answer = run_claude(srv, "patch", slide_path, n_patches=3)
    boxes = [s.box for s in answer.steps if s.action == "patch"]
    assert len(boxes) == 3 == len(srv.requests)
    with openslide.OpenSlide(str(slide_path)) as s:
        expected = [
            claude_request(s.read_region((x, y), 0, (224, 224)).convert("RGB")) for x, y, _, _ in boxes
        ]
    key = lambda body: body["messages"][0]["content"][1]["source"]["data"]  # noqa: E731 - any order
    assert sorted((r.json for r in srv.requests), key=key) == sorted(expected, key=key)
