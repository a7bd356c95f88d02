"""The real GIANT loop over real generated slides, driven by the loopback model server."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from giant_assets.agents.base import AgentAnswer, AgentItem
from giant_assets.agents.giant import RAW_FINAL, GiantAgent, parse_action
from giant_assets.agents.pricing import ModelPrice, PriceTable
from giant_assets.agents.providers import AnthropicChatModel, OpenAIChatModel, RetryPolicy
from giant_assets.demo.scripted_model import (
    Reply,
    ScriptedModelServer,
    answer_reply,
    crop_reply,
    demo_policy,
    malformed,
    rate_limited,
    server_error,
    unauthorized_echo,
)
from giant_assets.slides.synthetic import (
    ONE_LESION_DESIGN,
    render_level,
    write_pyramidal_slide,
)

DESIGN = ONE_LESION_DESIGN
KEY = "sk-giant-test-7f3a9cSECRET00000000000000001"
FAST = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.02, max_total_wait_s=5)
PRICES = PriceTable({"scripted-vlm": ModelPrice(input_per_mtok=2.0, output_per_mtok=8.0)})


@pytest.fixture(scope="module")
def slide_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(tmp_path_factory.mktemp("giant") / "slide.tiff", DESIGN, levels=4)


@pytest.fixture
def key_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("GIANT_TEST_KEY", KEY)
    return "GIANT_TEST_KEY"


def item(
    path: Path | str | None, prompt: str = "Which?\n1. Lung\n2. Liver\n3. Skin", options=None
) -> AgentItem:
    return AgentItem(
        "tcga", "item-1", prompt, options or ["Lung", "Liver", "Skin"], str(path) if path else None
    )


def agent_for(srv: ScriptedModelServer, key_env: str, provider=OpenAIChatModel, **kwargs) -> GiantAgent:
    base = srv.openai_base_url if provider is OpenAIChatModel else srv.base_url
    model = provider("scripted-vlm", base_url=base, api_key_env=key_env, retry=FAST)
    return GiantAgent(model, prices=PRICES, **kwargs)


def run_items(agent: GiantAgent, items: list[AgentItem]) -> list[AgentAnswer]:
    async def go():
        try:
            return await asyncio.gather(*(agent.answer(it, 0) for it in items))
        finally:
            await agent.aclose()

    return asyncio.run(go())


def trajectory_json(answer: AgentAnswer) -> str:
    return json.dumps({"text": answer.text, "error": answer.error, "steps": answer.steps_as_dicts()})


def test_crop_is_read_at_the_right_level_and_sent_pixel_exact(slide_path: Path, key_env: str) -> None:
    script = [
        replace(crop_reply(1024, 512, 2048, 1024), usage=(1000, 50)),
        replace(answer_reply("2"), usage=(3000, 20)),
    ]
    with ScriptedModelServer(script) as srv:
        agent = agent_for(srv, key_env, crop_size=512, thumbnail_size=1024, image_format="PNG")
        (ans,) = run_items(agent, [item(slide_path)])
    assert ans.error is None and ans.text == "2"
    assert [s.action for s in ans.steps] == ["thumbnail", "crop", "answer"]
    crop_step = ans.steps[1]
    assert (
        crop_step.box == [1024, 512, 2048, 1024]
        and crop_step.level == 2
        and crop_step.image_size == [512, 256]
    )
    assert (ans.input_tokens, ans.output_tokens) == (4000, 70)
    assert ans.cost_usd == pytest.approx((4000 * 2.0 + 70 * 8.0) / 1e6)
    assert [s.cost_usd for s in ans.steps[1:]] == pytest.approx(
        [(1000 * 2 + 50 * 8) / 1e6, (3000 * 2 + 20 * 8) / 1e6]
    )
    first, second = srv.requests
    thumb = np.asarray(first.images[0].convert("RGB"))
    assert ans.steps[0].level == 2 and list(thumb.shape[1::-1]) == ans.steps[0].image_size
    # the crop the model received is exactly the generated slide's level-2 pixels of that box
    sent = second.images[-1]
    assert len(second.images) == 2 and sent.format == "PNG"
    np.testing.assert_array_equal(np.asarray(sent.convert("RGB")), render_level(DESIGN, 4)[128:384, 256:768])
    assert "4096 x 3072 level-0 pixels" in first.text and "Crops left: 20." in first.text
    assert "read at pyramid level 2" in second.turns[-1].texts[0]


def test_forced_final_answer_after_max_steps(slide_path: Path, key_env: str) -> None:
    def always_crop(req):
        return (
            crop_reply(0, 0, 1024, 1024) if "No crops left" not in req.turns[-1].texts[-1] else Reply("Skin.")
        )

    with ScriptedModelServer(rule=always_crop) as srv:
        (ans,) = run_items(agent_for(srv, key_env, max_steps=3, crop_size=256), [item(slide_path)])
    assert len(srv.requests) == 4 and [r.assistant_turns for r in srv.requests] == [0, 1, 2, 3]
    assert [s.action for s in ans.steps] == ["thumbnail", "crop", "crop", "crop", "answer"]
    assert [s.level for s in ans.steps[1:4]] == [2, 2, 2]  # 1024 box -> 256 px: downsample 4
    assert ans.text == "Skin." and ans.error is None and ans.steps[-1].error == RAW_FINAL


def test_invalid_region_is_told_to_the_model(slide_path: Path, key_env: str) -> None:
    script = [crop_reply(9000, 9000, 100, 100), crop_reply(0, 0, 0, 10), answer_reply("1")]
    with ScriptedModelServer(script) as srv:
        (ans,) = run_items(agent_for(srv, key_env), [item(slide_path)])
    assert ans.error is None and ans.text == "1"
    assert [s.action for s in ans.steps] == ["thumbnail", "crop", "crop", "answer"]
    assert "outside the slide" in ans.steps[1].error and ans.steps[1].level is None
    assert "zero or negative" in ans.steps[2].error
    told = srv.requests[1].turns[-1].texts[0]
    assert "cannot be shown" in told and "x 0..4096, y 0..3072" in told
    assert len(srv.requests[1].images) == 1  # no crop image was sent for the invalid region


def test_unparseable_reply_gets_a_reminder(slide_path: Path, key_env: str) -> None:
    script = [Reply("Hmm, it looks like lung to me."), answer_reply("1")]
    with ScriptedModelServer(script) as srv:
        (ans,) = run_items(agent_for(srv, key_env), [item(slide_path)])
    assert ans.text == "1" and ans.steps[1].action == "error" and "no JSON" in ans.steps[1].error
    assert "could not find a JSON action" in srv.requests[1].turns[-1].texts[0]


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
    assert all([s.action for s in a.steps] == ["error"] for a in answers)


def test_500_forever_gives_an_error_answer(slide_path: Path, key_env: str) -> None:
    with ScriptedModelServer(rule=lambda req: server_error(500)) as srv:
        (ans,) = run_items(agent_for(srv, key_env), [item(slide_path)])
    assert len(srv.requests) == FAST.max_attempts
    assert "model call failed at step 1" in ans.error and "HTTP 500" in ans.error
    assert [s.action for s in ans.steps] == ["thumbnail", "error"]


def test_malformed_json_gives_a_clear_error_answer(slide_path: Path, key_env: str) -> None:
    with ScriptedModelServer([crop_reply(0, 0, 2048, 2048), malformed()]) as srv:
        (ans,) = run_items(agent_for(srv, key_env), [item(slide_path)])
    assert "model call failed at step 2" in ans.error and "not valid JSON" in ans.error
    assert [s.action for s in ans.steps] == ["thumbnail", "crop", "error"]


def test_429_storm_slows_down_but_every_item_finishes(slide_path: Path, key_env: str) -> None:
    """Each request of 6 concurrent items is first refused with Retry-After; all items still finish."""
    seen: set[bytes] = set()
    lock = threading.Lock()

    def stormy(req):
        with lock:
            first_time = req.body not in seen
            seen.add(req.body)
        return rate_limited(0.05) if first_time else demo_policy(req)

    items = [item(slide_path, prompt=f"Case {i}: which?\n1. Lung\n2. Liver\n3. Skin") for i in range(6)]
    with ScriptedModelServer(rule=stormy) as srv:
        answers = run_items(agent_for(srv, key_env, crop_size=256), items)
    assert all(a.error is None and a.text in {"1", "2", "3"} for a in answers)
    served = [r.status for r in srv.replies]
    assert served.count(200) == 12 and served.count(429) == 12  # crop + answer per item, each once refused
    assert all(s.latency_s >= 0.05 for a in answers for s in a.steps[1:])
    assert all([s.action for s in a.steps] == ["thumbnail", "crop", "answer"] for a in answers)


def test_api_key_never_stored(slide_path: Path, key_env: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    script = [rate_limited(0.01), crop_reply(0, 0, 2048, 2048), answer_reply("3"), unauthorized_echo()]
    with ScriptedModelServer(script) as srv:
        agent = agent_for(srv, key_env, crop_size=256)
        first = run_items(agent, [item(slide_path)])[0]
        agent2 = agent_for(srv, key_env, crop_size=256)
        second = run_items(agent2, [item(slide_path)])[0]
    assert all(r.headers["Authorization"] == f"Bearer {KEY}" for r in srv.requests)  # really sent
    assert first.error is None and "401" in second.error and "[REDACTED]" in second.error
    stored = trajectory_json(first) + trajectory_json(second) + repr(first) + repr(second) + repr(agent)
    assert KEY not in stored and KEY not in caplog.text
    assert all(KEY.encode() not in r.body for r in srv.requests)  # never in a request body either


def test_anthropic_provider_end_to_end(slide_path: Path, key_env: str) -> None:
    prompt = 'Grade this biopsy. Reply with JSON {"isup_grade": <0-5>}.'
    with ScriptedModelServer(rule=demo_policy) as srv:
        agent = agent_for(srv, key_env, provider=AnthropicChatModel, crop_size=256)
        (ans,) = run_items(agent, [AgentItem("panda", "p1", prompt, None, str(slide_path))])
    assert ans.error is None and 0 <= json.loads(ans.text)["isup_grade"] <= 5
    assert {r.wire for r in srv.requests} == {"anthropic"} and srv.requests[0].headers["x-api-key"] == KEY
    assert [len(r.images) for r in srv.requests] == [1, 2]


def test_demo_policy_crops_the_lesion(slide_path: Path, key_env: str) -> None:
    with ScriptedModelServer(rule=demo_policy) as srv:
        (ans,) = run_items(agent_for(srv, key_env, crop_size=512), [item(slide_path)])
    x, y, w, h = ans.steps[1].box
    bx, by, bw, bh = DESIGN.lesions[0].box_xywh
    assert x <= bx and y <= by and x + w >= bx + bw and y + h >= by + bh  # the whole lesion is in view
    assert w * h <= 16 * bw * bh  # and it is a close-up, not the whole slide
    assert ans.text in {"1", "2", "3"}


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ('```json\n{"action": "crop", "x": 10, "y": 20, "w": 30, "h": 40}\n```', "crop", [10, 20, 30, 40]),
        (
            'I will zoom. {"action":"CROP","x":"10","y":"20","w":"30","h":"40"} ok?',
            "crop",
            ["10", "20", "30", "40"],
        ),
        ('{"action": "crop", "bbox": [1, 2, 3, 4]}', "crop", [1, 2, 3, 4]),
        ('{"action": "crop", "x": 1}', "crop", [1]),  # incomplete: the crop step explains the problem
        (
            'e.g. {"action": "crop", "x": 0, "y": 0, "w": 1, "h": 1}; '
            'final: {"action": "answer", "answer": "B"}',
            "answer",
            "B",
        ),
        ('{"action": "answer", "answer": {"isup_grade": 3}}', "answer", '{"isup_grade": 3}'),
        ('{"isup_grade": 4}', "answer", '{"isup_grade": 4}'),
        ('{"answer": 2}', "answer", "2"),
        ('set {not json} then {"action": "answer", "answer": "Lung"}', "answer", "Lung"),
    ],
)
def test_parse_action_is_tolerant(text: str, kind: str, value) -> None:
    action = parse_action(text)
    assert action is not None and action.kind == kind
    assert (action.box if kind == "crop" else action.answer) == value


@pytest.mark.parametrize("text", ["It is lung.", "", '{"action": "zoom", "level": 3}', "[1, 2, 3]"])
def test_parse_action_none(text: str) -> None:
    assert parse_action(text) is None
