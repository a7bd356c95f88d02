"""Real API contracts outside the paper's settings, against the loopback model server that records every
request: reasoning options only to models that reason (and off on request), a refused reasoning summary
retried once without it and recorded, Anthropic's image limits kept per request, and settings the
providers would refuse stopped when the experiment is checked, naming the field and the limit."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from giant_assets.agents.providers import (
    AnthropicChatModel,
    ImagePart,
    Message,
    OpenAIChatModel,
    OpenAIResponsesModel,
    ProviderHTTPError,
    TextPart,
)
from giant_assets.agents.providers.errors import RequestNotSent
from giant_assets.demo.scripted import Reply, ScriptedModelServer, answer_reply
from giant_assets.experiments.declared import ExperimentsFileError, load_experiments
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.support.slides import write_pyramidal_slide

GIANT_RUN = Path(sys.executable).parent / "giant-run"
UNVERIFIED = (
    "Your organization must be verified to generate reasoning summaries. Please go to: "
    "https://platform.openai.com/settings/organization/general and click on Verify Organization."
)


def ask(model, messages=None):
    async def go():
        try:
            return await model.complete(messages or [Message.user(TextPart("q"))])
        finally:
            await model.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("cls", "model", "sent"),
    [
        (OpenAIResponsesModel, "gpt-4o", False),
        (OpenAIResponsesModel, "gpt-4.1-mini", False),
        (OpenAIChatModel, "gpt-4o-2024-08-06", False),
        (OpenAIChatModel, "gpt-4.1", False),
        (OpenAIResponsesModel, "gpt-5-chat-latest", False),
        (OpenAIResponsesModel, "gpt-5", True),
        (OpenAIChatModel, "o4-mini", True),
        (OpenAIChatModel, "o1-mini", False),
        (OpenAIChatModel, "qwen2.5-vl", True),  # unknown (a local server's): as configured
    ],
)
def test_reasoning_options_only_for_models_that_reason(cls, model: str, sent: bool) -> None:
    with ScriptedModelServer([Reply("fine")]) as srv:
        ask(cls(model, base_url=srv.openai_base_url, reasoning_effort="high"))
    body = srv.requests[0].json
    assert (("reasoning" in body) or ("reasoning_effort" in body)) is sent, body.keys()
    assert ("include" in body) is (sent and cls is OpenAIResponsesModel)


@pytest.mark.parametrize(
    ("model", "thinking"), [("claude-3-5-sonnet-20241022", False), ("claude-sonnet-4-5", True)]
)
def test_thinking_only_for_claude_models_that_think(model: str, thinking: bool) -> None:
    with ScriptedModelServer([Reply("fine")]) as srv:
        ask(AnthropicChatModel(model, base_url=srv.base_url, thinking_budget=2048))
    body = srv.requests[0].json
    assert ("thinking" in body) is thinking
    # the official 30000 (thinking included), within the model's output limit (claude-3-5: 8192)
    assert body["max_tokens"] == (30000 if thinking else 8192)


def test_a_refused_reasoning_summary_is_dropped_once_and_recorded() -> None:
    script = [Reply(status=400, text=UNVERIFIED), Reply("first"), Reply("second")]
    with ScriptedModelServer(script) as srv:
        model = OpenAIResponsesModel("gpt-5", base_url=srv.openai_base_url, reasoning_effort="high")

        async def go():
            try:
                return [await model.complete([Message.user(TextPart(q))]) for q in ("a", "b")]
            finally:
                await model.aclose()

        first, second = asyncio.run(go())
    reasoning = [r.json["reasoning"] for r in srv.requests]
    assert reasoning == [{"effort": "high", "summary": "detailed"}, {"effort": "high"}, {"effort": "high"}]
    assert first.text == "first" and second.text == "second"
    for reply in (first, second):
        (note,) = reply.notes
        assert note.startswith("reasoning summary dropped") and "must be verified" in note


def test_another_bad_request_is_not_retried() -> None:
    with ScriptedModelServer([Reply(status=400, text="Invalid value for 'input'."), Reply("never")]) as srv:
        model = OpenAIResponsesModel("gpt-5", base_url=srv.openai_base_url, reasoning_effort="high")
        with pytest.raises(ProviderHTTPError, match="Invalid value"):
            ask(model)
    assert len(srv.requests) == 1 and model.summary_dropped is None


def jpeg(size: tuple[int, int], seed: int = 0, noise: bool = False) -> ImagePart:
    rng = np.random.default_rng(seed)
    shape = (size[1], size[0], 3)
    pixels = rng.integers(0, 256, shape, dtype=np.uint8) if noise else np.full(shape, seed % 256, np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="JPEG", quality=95)
    return ImagePart(base64.b64encode(buf.getvalue()).decode(), label=f"image {seed}")


def conversation(sizes: list[tuple[int, int]]) -> list[Message]:
    """A question with the overview (image 0), then one user turn per further image, as crops come."""
    msgs = [Message.user(TextPart("question"), jpeg(sizes[0], 0))]
    msgs += [Message.user(TextPart(f"crop {i}"), jpeg(s, i)) for i, s in enumerate(sizes[1:], 1)]
    return msgs


def sent_images(body: dict) -> list[tuple[int, int, int]]:
    """(grey value = the image's number, width, height) of every image the server received, in order."""
    out = []
    for turn in body["messages"]:
        for block in turn["content"]:
            if block.get("type") == "image":
                img = Image.open(io.BytesIO(base64.b64decode(block["source"]["data"])))
                out.append((round(float(np.asarray(img).mean())), *img.size))
    return out


@pytest.mark.parametrize(
    ("sizes", "sent"),
    [
        ([(64, 48)] * 105, 100),  # over 100 images
        ([(64, 48)] * 24 + [(2100, 50)], 20),  # over 20 images, one of them over 2000 px
        ([(64, 48)] * 24 + [(2000, 50)], 25),  # 2000 px is allowed
        ([(64, 48)] * 100, 100),
    ],
)
def test_anthropic_image_limits_keep_the_overview_and_the_newest(sizes, sent: int) -> None:
    with ScriptedModelServer([Reply("fine")]) as srv:
        reply = ask(AnthropicChatModel("claude-sonnet-4-5", base_url=srv.base_url), conversation(sizes))
    body = srv.requests[0].json
    images = sent_images(body)
    assert len(images) == sent
    dropped = len(sizes) - sent
    if dropped:
        assert images[0] == (0, *sizes[0])  # the overview stays
        assert [n for n, *_ in images[1:]] == list(range(dropped + 1, len(sizes)))  # then the newest
        assert "[image 1: image removed from the context]" in json.dumps(body["messages"])
        (note,) = reply.notes
        assert note.startswith(f"{dropped} of {len(sizes)} images left out of the request")
    else:
        assert reply.notes == ()


@pytest.mark.parametrize(
    ("image", "limit"),
    [(jpeg((8100, 16), 1), "above Anthropic's 8000 px per side"),
     (jpeg((2200, 2200), 2, noise=True), "bytes of base64, above Anthropic's 5,242,880")],
)  # fmt: skip
def test_an_image_no_request_may_hold_is_refused_before_sending(image: ImagePart, limit: str) -> None:
    with ScriptedModelServer([Reply("never")]) as srv, pytest.raises(RequestNotSent, match=limit):
        ask(AnthropicChatModel("claude-sonnet-4-5", base_url=srv.base_url), [Message.user(image)])
    assert srv.requests == []


def check(tmp_path: Path, settings: str) -> None:
    agent = "" if "agent:" in settings else "agent: giant, "
    path = tmp_path / "experiments.yaml"
    path.write_text(f"experiments:\n  e: {{{agent}provider: anthropic, budget_usd: 5, {settings}}}\n")
    load_experiments(path)


@pytest.mark.parametrize(
    ("settings", "refusal"),
    [
        ("model: claude-sonnet-4-5, thinking_budget: 500", "field 'thinking_budget': 500 is below .* 1024"),
        (
            "model: claude-sonnet-4-5, max_output_tokens: 64001",
            r"field 'max_output_tokens': 64001 is above claude-sonnet-4-5's output limit of 64000",
        ),
        (
            "model: claude-opus-4-1, thinking_budget: 30000",
            "field 'thinking_budget': 30000 thinking tokens leave nothing of max_tokens 30000",
        ),
        ("model: claude-sonnet-4-5, max_steps: 150", "field 'max_images_in_context': .* 150 images .* 100"),
        (  # the official Claude agent's pruning keeps every crop: all 150 images stay
            "model: claude-sonnet-4-5, max_steps: 150, max_images_in_context: 100",
            "field 'max_images_in_context': .* 150 images .* prune_tool_images: true",
        ),
        ("model: claude-sonnet-4-5, max_steps: 30, image_size: 2500", "field 'image_size': 2500 px .* 2000"),
        ("model: claude-sonnet-4-5, image_size: 8192, max_steps: 5", "field 'image_size': 8192 px .* 8000"),
        ("model: claude-sonnet-4-5, agent: thumbnail, thumbnail_size: 10000", "field 'thumbnail_size'"),
    ],
)
def test_settings_the_provider_would_refuse_fail_the_check(
    tmp_path: Path, settings: str, refusal: str
) -> None:
    with pytest.raises(ExperimentsFileError, match=f"experiment 'e': {refusal}"):
        check(tmp_path, settings)


@pytest.mark.parametrize(
    "settings",
    [
        "model: claude-sonnet-4-5, thinking_budget: 0",
        "model: claude-sonnet-4-5, thinking_budget: 29999",
        "model: claude-sonnet-4-5, thinking_budget: 59904, max_output_tokens: 64000",
        "model: claude-sonnet-4-5, max_steps: 150, max_images_in_context: 100, prune_tool_images: true",
        "model: claude-sonnet-4-5, max_steps: 30, image_size: 2500, max_images_in_context: 20, "
        "prune_tool_images: true",
        "model: claude-3-5-sonnet-20241022, thinking_budget: 64000",  # never sent to a model without thinking
    ],
)
def test_settings_within_the_limits_pass_the_check(tmp_path: Path, settings: str) -> None:
    check(tmp_path, settings)


@pytest.fixture(scope="module")
def slide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(
        tmp_path_factory.mktemp("contract") / "slide.tiff", ONE_LESION_DESIGN, levels=3
    )


def giant_run(slide: Path, server: ScriptedModelServer, *args: str, out: Path | None = None):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    argv = [str(GIANT_RUN), str(slide), "--question", "Which?", "--options", "A", "B", "--max-steps", "2",
            *args]  # fmt: skip
    if "anthropic" not in args:
        argv += ["--provider", "openai", "--base-url", server.openai_base_url]
    argv += ["--out", str(out)] if out else []
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, check=False)


def test_giant_run_turns_reasoning_off(slide: Path) -> None:
    with ScriptedModelServer([answer_reply(1)]) as srv:
        result = giant_run(slide, srv, "--model", "gpt-5", "--reasoning-effort", "none")
    assert result.returncode == 0, result.stderr
    assert not srv.requests[0].reasoning_enabled


def test_giant_run_records_a_dropped_summary_in_the_trajectory(slide: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    with ScriptedModelServer([Reply(status=400, text=UNVERIFIED), answer_reply(2)]) as srv:
        result = giant_run(slide, srv, "--model", "gpt-5", out=out)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "label: 2"
    assert "provider note: reasoning summary dropped" in result.stdout
    answer = json.loads(out.read_text())["steps"][-1]
    assert answer["action"] == "answer"
    assert answer["provider_notes"][0].startswith("reasoning summary dropped")


def test_giant_run_refuses_a_thinking_budget_below_the_minimum(slide: Path, monkeypatch, capsys) -> None:
    from tests.agents.test_run_cli import giant_run_in_process  # a refusal before any call: in-process

    with ScriptedModelServer([]) as srv:
        code, stderr = giant_run_in_process(
            monkeypatch, capsys, str(slide), "--question", "Which?", "--options", "A", "B",
            "--max-steps", "2", "--provider", "anthropic", "--base-url", srv.base_url,
            "--model", "claude-sonnet-4-5", "--thinking-budget", "500",
        )  # fmt: skip
    assert code == 2 and "thinking_budget': 500 is below" in stderr
    assert srv.requests == []
