"""The GIANT loop (released protocol) over real generated slides, through the real SDKs, driven by the
loopback model server speaking each wire format."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from giant_assets.agents.giant import (
    MAX_RETRIES_EXCEEDED,
    RAW_FINAL,
    GiantAgent,
    parse_action,
    split_answer,
)
from giant_assets.agents.pricing import ModelPrice, PriceTable
from giant_assets.agents.providers import (
    AnthropicChatModel,
    OpenAIChatModel,
    OpenAIResponsesModel,
    RetryPolicy,
)
from giant_assets.agents.registry import make_agent
from giant_assets.demo.scripted import (
    Reply,
    ScriptedModelServer,
    answer_reply,
    crop_reply,
    demo_policy,
    rate_limited,
    server_error,
    unauthorized_echo,
)
from giant_assets.experiments.prompts import BUILT_IN, load_prompt_template
from giant_assets.experiments.spec import Experiment
from giant_assets.runs.agent_api import AgentAnswer, AgentItem
from giant_assets.runs.journal import Journal
from giant_assets.runs.runner import BatchSettings, run_batch
from giant_assets.slides.guides import GUIDE_COLOR
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.support.slides import write_pyramidal_slide

DESIGN = ONE_LESION_DESIGN  # 4096 x 3072, levels at downsample 1, 2, 4, 8
KEY = "sk-giant-test-7f3a9cSECRET00000000000000001"
FAST = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.02, max_total_wait_s=5)
PRICE = ModelPrice(
    input_per_mtok=2.0, output_per_mtok=8.0, cached_input_per_mtok=0.5, cache_write_per_mtok=2.5
)
PRICES = PriceTable({"scripted-vlm": PRICE})
WIRES = {"responses": OpenAIResponsesModel, "chat": OpenAIChatModel, "messages": AnthropicChatModel}
PROMPT = 'Which organ?\n1. Lung\n2. Liver\n3. Skin\nAnswer as JSON {"answer": N}.'


@pytest.fixture(scope="module")
def slide_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(tmp_path_factory.mktemp("giant") / "slide.tiff", DESIGN, levels=4)


@pytest.fixture
def key_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("GIANT_TEST_KEY", KEY)
    return "GIANT_TEST_KEY"


def item(path: Path | str | None, prompt: str = PROMPT, bid: str = "item-1") -> AgentItem:
    return AgentItem("tcga", bid, prompt, ["Lung", "Liver", "Skin"], str(path) if path else None)


def agent_for(srv: ScriptedModelServer, key_env: str, api: str = "responses", **kwargs) -> GiantAgent:
    base = srv.base_url if api == "messages" else srv.openai_base_url
    model = WIRES[api]("scripted-vlm", base_url=base, api_key_env=key_env, retry=FAST)
    kwargs.setdefault("image_size", 500 if api == "messages" else 1000)
    return GiantAgent(model, prices=PRICES, **kwargs)


def run_items(agent: GiantAgent, items: list[AgentItem], run_index: int = 0) -> list[AgentAnswer]:
    async def go():
        try:
            return await asyncio.gather(*(agent.answer(it, run_index) for it in items))
        finally:
            await agent.aclose()

    return asyncio.run(go())


def trajectory_json(answer: AgentAnswer) -> str:
    return json.dumps({"text": answer.text, "error": answer.error, "steps": answer.steps_as_dicts()})


@pytest.mark.parametrize(("api", "long_side"), [("responses", 1000), ("chat", 1000), ("messages", 500)])
def test_tool_protocol_on_each_wire(slide_path: Path, key_env: str, api: str, long_side: int) -> None:
    with ScriptedModelServer(rule=demo_policy) as srv:
        (ans,) = run_items(agent_for(srv, key_env, api), [item(slide_path)])
    assert ans.error is None and ans.response_tagged and json.loads(ans.text)["answer"] in {"1", "2", "3"}
    assert [s.action for s in ans.steps] == ["thumbnail", "crop", "answer"]
    assert all(r.tools == ["slide_zoom"] for r in srv.requests)  # the tool is offered at every step
    assert [r.wire for r in srv.requests] == [api, api]
    overview, crop = srv.requests[1].images
    assert max(overview.size) == long_side and overview.size == tuple(ans.steps[0].image_size)
    # the demo's lesion box is smaller than 1000 level-0 pixels: native size for OpenAI, 500 for Anthropic
    x, y, w, h = ans.steps[1].box
    assert crop.size == tuple(ans.steps[1].image_size)
    assert max(crop.size) == (max(w, h) if api != "messages" else 500)
    (tool_turn,) = [t for t in srv.requests[1].turns if t.role == "tool"]
    assert tool_turn.texts[0].startswith(f"This is the region whose top-left corner is at ({x},{y})")
    assert srv.requests[1].turns[2].tool_calls[0][0] == "slide_zoom"
    assert ans.steps[2].report.startswith("Based on") and ans.steps[1].tool_call_id


def test_crop_level_pixels_and_guides(slide_path: Path, key_env: str) -> None:
    script = [crop_reply(1024, 512, 2048, 1024), answer_reply("2")]
    with ScriptedModelServer(script) as srv:
        agent = agent_for(srv, key_env, image_size=500, image_format="PNG")
        (ans,) = run_items(agent, [item(slide_path)])
    crop_step = ans.steps[1]
    # needed downsample 2048/500 = 4.1, x 0.85 = 3.5: level 1 (downsample 2) reads 1024 px >= 500
    assert crop_step.box == [1024, 512, 2048, 1024] and crop_step.requested_box == [1024, 512, 2048, 1024]
    assert crop_step.level == 1 and crop_step.image_size == [500, 250]
    crop = np.asarray(srv.requests[1].images[1].convert("RGB"))
    assert crop.shape == (250, 500, 3)
    green = np.all(crop == GUIDE_COLOR, axis=2)
    for col in (100, 200, 300, 400):  # four guide lines per axis at i/5 of the width
        assert green[:, col].mean() > 0.6, col
    for row in (50, 100, 150, 200):
        assert green[row, :].mean() > 0.6, row
    assert green[:, 150].mean() < 0.1  # between lines: the slide itself


def test_cost_with_cached_tokens_hand_computed(slide_path: Path, key_env: str) -> None:
    script = [
        replace(crop_reply(0, 0, 2048, 2048), usage=(1000, 50), cached=0),
        replace(answer_reply("2"), usage=(3000, 20), cached=1000),
    ]
    with ScriptedModelServer(script) as srv:
        (ans,) = run_items(agent_for(srv, key_env), [item(slide_path)])
    assert (ans.input_tokens, ans.output_tokens, ans.cached_input_tokens) == (4000, 70, 1000)
    hand = (1000 * 2.0 + 50 * 8.0) / 1e6 + (2000 * 2.0 + 1000 * 0.5 + 20 * 8.0) / 1e6
    assert ans.cost_usd == pytest.approx(hand)
    assert ans.steps[2].cached_input_tokens == 1000


def test_anthropic_cache_writes_priced_at_the_write_rate(slide_path: Path, key_env: str) -> None:
    with ScriptedModelServer(rule=demo_policy) as srv:
        (ans,) = run_items(agent_for(srv, key_env, "messages"), [item(slide_path)])
    first, second = ans.steps[1], ans.steps[2]
    assert first.cache_write_tokens == first.input_tokens and second.cached_input_tokens > 0
    for s in (first, second):
        plain = s.input_tokens - s.cached_input_tokens - s.cache_write_tokens
        hand = (
            plain * 2.0 + s.cached_input_tokens * 0.5 + s.cache_write_tokens * 2.5 + s.output_tokens * 8
        ) / 1e6
        assert s.cost_usd == pytest.approx(hand)
    body = srv.requests[1].json
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}


def test_responses_sends_one_cache_key_per_run(slide_path: Path, key_env: str) -> None:
    with ScriptedModelServer(rule=demo_policy) as srv:
        run_items(agent_for(srv, key_env), [item(slide_path, bid="a"), item(slide_path, bid="b")])
    keys = [r.json["prompt_cache_key"] for r in srv.requests]
    assert len(keys) == 4 and len(set(keys)) == 2
    assert all("reasoning" not in r.json for r in srv.requests)  # no reasoning_effort given here


def test_step_budget_counts_the_answer_then_four_attempts(slide_path: Path, key_env: str) -> None:
    """T = 3: two crops and a third call that still asks for a crop -> rerun; 4 attempts, then failure."""
    with ScriptedModelServer(rule=lambda req: crop_reply(0, 0, 1024, 1024)) as srv:
        (ans,) = run_items(agent_for(srv, key_env, max_steps=3), [item(slide_path)])
    assert len(srv.requests) == 12 and [r.assistant_turns for r in srv.requests] == [0, 1, 2] * 4
    assert all(r.tools == ["slide_zoom"] for r in srv.requests)  # offered at the last step too
    assert "Function calls left: 0." in srv.requests[2].turns[-1].texts[0]  # T - 2 - 1, as officially
    assert ans.error_kind == MAX_RETRIES_EXCEEDED and ans.text == "" and ans.attempts == 4
    per_attempt = ["thumbnail", "crop", "crop", "no_answer"]
    assert [s.action for s in ans.steps] == per_attempt * 4
    assert [s.attempt for s in ans.steps] == [a for a in (1, 2, 3, 4) for _ in per_attempt]
    assert [s.index for s in ans.steps] == list(range(16))
    assert ans.cost_usd == pytest.approx(sum(s.cost_usd for s in ans.steps)) and ans.cost_usd > 0
    assert sum(s.action == "crop" for s in ans.steps if s.attempt == 1) == 2  # at most T-1 crops


def test_rerun_from_scratch_then_answer(slide_path: Path, key_env: str) -> None:
    script = [crop_reply(0, 0, 1024, 1024), crop_reply(0, 0, 512, 512), answer_reply("3")]
    with ScriptedModelServer(script) as srv:
        (ans,) = run_items(agent_for(srv, key_env, max_steps=2, max_attempts=2), [item(slide_path)])
    assert ans.error is None and ans.attempts == 2 and json.loads(ans.text) == {"answer": "3"}
    assert [(s.attempt, s.action) for s in ans.steps] == [
        (1, "thumbnail"), (1, "crop"), (1, "no_answer"), (2, "thumbnail"), (2, "answer")
    ]  # fmt: skip
    assert srv.requests[2].assistant_turns == 0 and len(srv.requests[2].images) == 1  # from scratch


def test_runner_records_max_retries_exceeded(slide_path: Path, key_env: str, tmp_path: Path) -> None:
    row = {"benchmark_name": "tcga", "benchmark_id": "x", "prompt": PROMPT, "truth_label": 1,
           "options": ["Lung", "Liver", "Skin"], "wsi_path": str(slide_path)}  # fmt: skip
    with ScriptedModelServer(rule=lambda req: crop_reply(0, 0, 1024, 1024)) as srv:
        agent = agent_for(srv, key_env, max_steps=2, max_attempts=2)

        async def go():
            try:
                return await run_batch(agent, [row], config_hash="h", journal=Journal(tmp_path / "j.jsonl"),
                                       settings=BatchSettings())  # fmt: skip
            finally:
                await agent.aclose()

        outcome = asyncio.run(go())
    (result,) = outcome.rows
    assert result["error_kind"] == "max_retries_exceeded" and result["correct"] is False
    assert result["predicted_label"] is None and len(srv.requests) == 4
    assert len(json.loads(result["trajectory_json"])) == 6


def test_untagged_answer_falls_back_to_the_whole_text(slide_path: Path, key_env: str) -> None:
    with ScriptedModelServer([Reply('I think {"answer": 2}')]) as srv:
        (ans,) = run_items(agent_for(srv, key_env), [item(slide_path)])
    assert ans.text == 'I think {"answer": 2}' and ans.response_tagged is False
    assert ans.steps[-1].response_tagged is False and ans.steps[-1].action == "answer"
    assert split_answer('<report>r</report>\n<response> {"a": 1} </response>') == ('{"a": 1}', "r", True)


def test_invalid_region_is_told_to_the_model(slide_path: Path, key_env: str) -> None:
    script = [
        crop_reply(9000, 9000, 100, 100),
        crop_reply(0, 0, 0, 10),
        crop_reply(0, 0, "a", 5),
        answer_reply("1"),
    ]
    with ScriptedModelServer(script) as srv:
        (ans,) = run_items(agent_for(srv, key_env), [item(slide_path)])
    assert ans.error is None and [s.action for s in ans.steps] == [
        "thumbnail",
        "crop",
        "crop",
        "crop",
        "answer",
    ]
    assert (
        "outside the slide" in ans.steps[1].error and ans.steps[1].level is None and ans.steps[1].box is None
    )
    assert "zero or negative" in ans.steps[2].error and "not an integer" in ans.steps[3].error
    told = [t for t in srv.requests[1].turns if t.role == "tool"][0].texts[0]
    assert told.startswith("Error: That region cannot be shown") and "x 0..4096, y 0..3072" in told
    assert len(srv.requests[3].images) == 1  # no crop image was sent for an invalid region


def test_prompt_template_placeholders(slide_path: Path, key_env: str, tmp_path: Path) -> None:
    good = tmp_path / "prompt.txt"
    good.write_text(
        "Slide {width}x{height}; {max_steps} turns, {analysis_steps} zooms, {image_size} px. {{json}}"
    )
    with ScriptedModelServer([answer_reply("1")]) as srv:
        template = load_prompt_template(good)
        agent = agent_for(srv, key_env, max_steps=5, prompts=replace(BUILT_IN, multi_step=template))
        run_items(agent, [item(slide_path)])
    system = srv.requests[0].json["input"][0]
    text = "Slide 4096x3072; 5 turns, 4 zooms, 1000 px. {json}"
    assert system == {"role": "system", "type": "message", "content": text}
    bad = tmp_path / "bad.txt"
    bad.write_text("Hello {width} {magnification}")
    with pytest.raises(ValueError, match=r"bad.txt: multi_step has unknown placeholder \{magnification\}"):
        load_prompt_template(bad)
    broken = tmp_path / "broken.txt"
    broken.write_text("a { b")
    with pytest.raises(ValueError, match="broken.txt: multi_step is not a valid template"):
        load_prompt_template(broken)


def test_random_patch_slide_zoom_option_is_the_same_loop_with_seeded_random_crops(
    slide_path: Path, key_env: str
) -> None:
    experiment = Experiment(
        name="rp",
        agent="random_patch",
        model="scripted-vlm",
        api_key_env=key_env,
        seed=7,
        random_patch_tool="slide_zoom",
    )
    script = [crop_reply(2800, 1100, 512, 512)] * 3 + [answer_reply("1")]

    def boxes(run_index: int) -> list[tuple]:
        with ScriptedModelServer(list(script)) as srv:
            agent = make_agent(
                experiment.model_copy(update={"base_url": srv.openai_base_url}), pd.DataFrame(), None
            )
            agent.prices = PRICES
            (ans,) = run_items(agent, [item(slide_path)], run_index)
        assert ans.error is None and agent.name == "random_patch"
        assert all(s.requested_box == [2800, 1100, 512, 512] for s in ans.steps if s.action == "crop")
        assert all("chosen at random" in t.texts[0] for t in srv.requests[-1].turns if t.role == "tool")
        return [tuple(s.box) for s in ans.steps if s.action == "crop"]

    first, again, other_run = boxes(0), boxes(0), boxes(1)
    assert first == again and first != other_run  # seeded per (seed, item, run)
    assert len(set(first)) == 3 and all(b[2:] == (512, 512) for b in first)
    assert any(b[:2] != (2800, 1100) for b in first)


def test_json_protocol_is_kept(slide_path: Path, key_env: str) -> None:
    script = [crop_reply(1024, 512, 2048, 1024), Reply("Hmm, lung?"), Reply("Skin, surely.")]
    with ScriptedModelServer(script) as srv:
        (ans,) = run_items(agent_for(srv, key_env, protocol="json", max_steps=3), [item(slide_path)])
    assert all(r.tools == [] for r in srv.requests) and '"action": "crop"' in srv.requests[1].text
    assert [s.action for s in ans.steps] == ["thumbnail", "crop", "error", "answer"]
    assert "could not find a JSON action" in srv.requests[2].turns[-1].texts[0]
    assert ans.text == "Skin, surely." and ans.steps[-1].error == RAW_FINAL


def test_missing_corrupt_or_unresolved_slide_is_an_error_answer(tmp_path: Path, key_env: str) -> None:
    corrupt = tmp_path / "bad.tiff"
    corrupt.write_bytes(b"II*\x00" + b"\x00" * 60)
    with ScriptedModelServer() as srv:
        answers = run_items(
            agent_for(srv, key_env), [item(tmp_path / "missing.svs"), item(corrupt), item(None)]
        )
    assert len(srv.requests) == 0
    assert "slide file not found" in answers[0].error and "missing.svs" in answers[0].error
    assert "bad.tiff" in answers[1].error and "item-1 has no resolved slide path" in answers[2].error
    assert all(a.text == "" and a.error.startswith("slide unavailable") for a in answers)


def test_500_forever_gives_an_error_answer(slide_path: Path, key_env: str) -> None:
    with ScriptedModelServer(rule=lambda req: server_error(500)) as srv:
        (ans,) = run_items(agent_for(srv, key_env, "messages"), [item(slide_path)])
    assert len(srv.requests) == FAST.max_attempts and ans.error_kind is None
    assert "model call failed at step 1" in ans.error and "HTTP 500" in ans.error
    assert [s.action for s in ans.steps] == ["thumbnail", "error"]


def test_api_key_never_stored(slide_path: Path, key_env: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    script = [rate_limited(0.01), crop_reply(0, 0, 2048, 2048), answer_reply("3"), unauthorized_echo()]
    with ScriptedModelServer(script) as srv:
        agent = agent_for(srv, key_env)
        first = run_items(agent, [item(slide_path)])[0]
        agent2 = agent_for(srv, key_env, "messages")
        second = run_items(agent2, [item(slide_path)])[0]
    assert all(
        KEY in r.headers.get("Authorization", "") + r.headers.get("x-api-key", "") for r in srv.requests
    )
    assert first.error is None and "401" in second.error and "[REDACTED]" in second.error
    stored = trajectory_json(first) + trajectory_json(second) + repr(first) + repr(second) + repr(agent)
    assert KEY not in stored and KEY not in caplog.text
    assert all(KEY.encode() not in r.body for r in srv.requests)  # never in a request body either


def test_demo_policy_crops_the_lesion(slide_path: Path, key_env: str) -> None:
    with ScriptedModelServer(rule=demo_policy) as srv:
        (ans,) = run_items(agent_for(srv, key_env), [item(slide_path)])
    x, y, w, h = ans.steps[1].box
    bx, by, bw, bh = DESIGN.lesions[0].box_xywh
    assert x <= bx and y <= by and x + w >= bx + bw and y + h >= by + bh  # the whole lesion is in view
    assert w * h <= 16 * bw * bh  # and it is a close-up, not the whole slide


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ('```json\n{"action": "crop", "x": 10, "y": 20, "w": 30, "h": 40}\n```', "crop", [10, 20, 30, 40]),
        ('{"action": "crop", "bbox": [1, 2, 3, 4]}', "crop", [1, 2, 3, 4]),
        ('{"action": "crop", "x": 1}', "crop", [1]),
        (
            'e.g. {"action": "crop", "x": 0, "y": 0, "w": 1, "h": 1}; '
            'final: {"action": "answer", "answer": "B"}',
            "answer",
            "B",
        ),  # fmt: skip
        ('{"action": "answer", "answer": {"isup_grade": 3}}', "answer", '{"isup_grade": 3}'),
        ('{"isup_grade": 4}', "answer", '{"isup_grade": 4}'),
    ],
)
def test_parse_action_is_tolerant(text: str, kind: str, value) -> None:
    action = parse_action(text)
    assert action is not None and action.kind == kind
    assert (action.box if kind == "crop" else action.answer) == value
