"""Thumbnail and patch baselines over real slides against a real loopback model, in all three wire formats."""

from __future__ import annotations

import asyncio
import base64
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from giant_assets.agents.baselines import PatchAgent, ThumbnailAgent
from giant_assets.agents.overviews import PROCESS_OVERVIEWS
from giant_assets.agents.pricing import ModelPrice, PriceTable
from giant_assets.agents.providers import RetryPolicy, make_chat_model
from giant_assets.agents.registry import make_agent
from giant_assets.demo.scripted import RecordedRequest, Reply, ScriptedModelServer
from giant_assets.experiments.spec import Experiment
from giant_assets.multipathqa.prompts import render_prompt
from giant_assets.runs.agent_api import AgentItem
from giant_assets.runs.journal import Journal
from giant_assets.runs.runner import BatchSettings, run_batch
from giant_assets.slides.access import encode_image, open_slide
from giant_assets.slides.synthetic import LESION, TISSUE, Blob, SlideDesign
from tests.support.slides import write_pyramidal_slide

# a large tissue section with a large dark lesion: patches land on both, so the vote has two camps
DESIGN = SlideDesign(
    4096,
    3072,
    tissue=(Blob(2048, 1536, 1600, 1200, TISSUE),),
    lesions=(Blob(1500, 1536, 600, 800, LESION),),
)
OPTIONS = ["Low", "Medium", "High", "Cannot determine"]
PRICES = PriceTable({"scripted-vlm": ModelPrice(input_per_mtok=2.0, output_per_mtok=8.0)})
FAST = RetryPolicy(max_attempts=2, base_delay_s=0.01, max_delay_s=0.02, max_total_wait_s=2)
# what the loopback model says, by how dark the patch is, and the label each reply means
DARK_REPLY, LIGHT_REPLY, UNSURE_REPLY = "The answer is 3 (High).", '{"answer": 1}', "I cannot tell."
MEANS = {DARK_REPLY: 3, LIGHT_REPLY: 1, UNSURE_REPLY: None}


def in_tissue(x: float, y: float, grow: float = 0.0) -> bool:
    b = DESIGN.tissue[0]
    return ((x - b.cx) / (b.rx + grow)) ** 2 + ((y - b.cy) / (b.ry + grow)) ** 2 <= 1.0


def by_darkness(request: RecordedRequest) -> Reply:
    """Dark (lesion) patches answer 3, light ones 1, a patch with both 'cannot tell'."""
    luma = np.asarray(request.images[-1].convert("L"))
    dark = float((luma < 110).mean())
    text = DARK_REPLY if dark > 0.9 else LIGHT_REPLY if dark < 0.1 else UNSURE_REPLY
    return Reply(text, usage=(300, 20))


@pytest.fixture(scope="module")
def slide_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(tmp_path_factory.mktemp("baselines") / "s.tiff", DESIGN, levels=4)


def make_item(path: Path, benchmark_id: str = "17") -> AgentItem:
    prompt = render_prompt("What is the level of mitotic activity?", OPTIONS)
    return AgentItem("tcga_expert_vqa", benchmark_id, prompt, OPTIONS, str(path), 4096, 3072)


def experiment(
    server: ScriptedModelServer, agent: str, provider: str = "openai", api: str | None = "chat", **extra
) -> Experiment:
    url = server.openai_base_url if provider == "openai" else server.base_url
    api = api if provider == "openai" else None
    return Experiment(
        name="t", agent=agent, provider=provider, api=api, model="scripted-vlm", base_url=url, **extra
    )


def build(exp: Experiment):
    chat = make_chat_model(exp, None, retry=FAST)
    return (ThumbnailAgent if exp.agent == "thumbnail" else PatchAgent)(chat, exp, PRICES)


async def run(exp: Experiment, *items_runs: tuple[AgentItem, int]):
    agent = build(exp)
    try:
        return [await agent.answer(it, r) for it, r in items_runs]
    finally:
        await agent.aclose()


@pytest.mark.parametrize(
    ("provider", "api", "size", "want_size", "level"),
    [
        # up to 1024: OpenSlide's get_thumbnail, the best level for 4096/700 = 5.85 is level 2 (4)
        ("openai", "chat", 700, (700, 525), 2),
        ("anthropic", None, None, (1024, 768), 2),  # the released default 1024 for every provider: 4x
        ("openai", None, None, (1024, 768), 2),
        # above 1024: the overview reader, 2.05 x 0.85 = 1.74 -> level 0
        ("openai", None, 2000, (2000, 1500), 0),
    ],
)
def test_thumbnail_one_call_at_the_configured_size(slide_path, provider, api, size, want_size, level) -> None:
    with ScriptedModelServer(script=[Reply('Grade: {"answer": 2}', usage=(1500, 40))]) as server:
        exp = experiment(server, "thumbnail", provider, api, **({"thumbnail_size": size} if size else {}))
        (answer,) = asyncio.run(run(exp, (make_item(slide_path), 0)))
    assert len(server.requests) == 1
    request = server.requests[0]
    assert request.wire == exp.resolved_api
    (image,) = request.images
    assert image.size == want_size
    # the released call: one user turn, the prompt and the image, no system prompt, no image detail
    assert [t.role for t in request.turns] == ["user"] and list(request.turns[0].texts) == [
        make_item(slide_path).prompt
    ]
    assert "system" not in request.json and "instructions" not in request.json
    assert '"detail"' not in request.body.decode()
    assert answer.error is None and answer.text == 'Grade: {"answer": 2}'
    (step,) = answer.steps
    assert (step.action, step.box, step.level, step.image_size) == (
        "answer",
        [0, 0, 4096, 3072],
        level,
        [*want_size],
    )
    assert (step.input_tokens, step.output_tokens) == (1500, 40)
    assert step.cost_usd == pytest.approx((1500 * 2.0 + 40 * 8.0) / 1e6)


def test_thumbnail_read_once_per_slide_file_and_ahead_through_the_runner(slide_path, tmp_path) -> None:
    PROCESS_OVERVIEWS.clear()  # this agent's own reads: none taken from an earlier test's
    rows = [
        {"benchmark_name": "tcga_expert_vqa", "benchmark_id": bid, "prompt": make_item(slide_path).prompt,
         "options": OPTIONS, "wsi_path": str(slide_path), "truth_label": 2}
        for bid in ("1", "2")
    ]  # fmt: skip
    with ScriptedModelServer(rule=lambda _: Reply('{"answer": 2}')) as server:
        agent = build(experiment(server, "thumbnail", thumbnail_size=700))  # get_thumbnail's range

        async def go():
            try:
                return await run_batch(
                    agent, rows, config_hash="h", journal=Journal(tmp_path / "j.jsonl"),
                    settings=BatchSettings(runs_per_item=3, concurrency=2), log=lambda _: None,
                )  # fmt: skip
            finally:
                await agent.aclose()

        outcome = asyncio.run(go())
    assert outcome.executed == 6 and all(r["correct"] for r in outcome.rows)
    assert agent.thumbnails.reads == 1  # six runs over two questions on one slide file
    slide = open_slide(slide_path)
    try:  # the oracle: OpenSlide's own thumbnail, JPEG at Pillow's default quality
        expected = base64.b64decode(encode_image(slide.get_thumbnail((700, 700)), quality=75))
    finally:
        slide.close()
    assert [r.turns[-1].images[0] for r in server.requests] == [expected] * 6


def test_patch_thirty_calls_in_tissue_voted(slide_path) -> None:
    with ScriptedModelServer(rule=by_darkness) as server:
        exp = experiment(server, "patch")
        (answer,) = asyncio.run(run(exp, (make_item(slide_path), 0)))
    assert answer.error is None
    assert len(server.requests) == 30
    assert all([im.size for im in r.images] == [(224, 224)] for r in server.requests)  # native size
    assert all([t.role for t in r.turns] == ["user"] and "system" not in r.json for r in server.requests)
    patches, final = answer.steps[:30], answer.steps[30]
    assert [s.index for s in patches] == list(range(30)) and {s.action for s in patches} == {"patch"}
    for s in patches:
        x, y, w, h = s.box
        assert (w, h) == (224, 224) and s.level == 0 and s.image_size == [224, 224]
        # CLAM's four_pt: a point half-way from the centre to a corner on tissue (the mask: 64 px pixels)
        near = [in_tissue(x + 112 + dx, y + 112 + dy, grow=192) for dx in (-56, 56) for dy in (-56, 56)]
        assert any(near), s.box
        assert s.cost_usd == pytest.approx((300 * 2.0 + 20 * 8.0) / 1e6)
    assert len({tuple(s.box) for s in patches}) == 30  # without replacement
    # one grid from the tissue's bounding box corner: every patch at a multiple of 224 from the others
    xs, ys = np.array([s.box[0] for s in patches]), np.array([s.box[1] for s in patches])
    assert len(set(xs % 224)) == 1 and len(set(ys % 224)) == 1
    labels = [MEANS[s.text] for s in patches]
    camps = Counter(label for label in labels if label is not None)
    assert camps[1] > 0 and camps[3] > 0, camps  # both light and dark patches were drawn
    top = max(camps.values())
    expected = next(label for label in labels if label is not None and camps[label] == top)
    assert answer.text == json.dumps({"answer": expected})
    assert (
        final.action == "answer" and final.input_tokens == 0 and "majority of 30 patch labels" in final.text
    )
    assert answer.cost_usd == pytest.approx(30 * (300 * 2.0 + 20 * 8.0) / 1e6)


def test_patch_otsu_sampler_keeps_whole_patches_on_tissue(slide_path) -> None:
    """``patch_sampler: otsu``: the platform's earlier sampler, every corner on tissue, off the grid."""
    with ScriptedModelServer(rule=by_darkness) as server:
        (answer,) = asyncio.run(
            run(experiment(server, "patch", patch_sampler="otsu"), (make_item(slide_path), 0))
        )
    boxes = [s.box for s in answer.steps if s.action == "patch"]
    assert len(boxes) == 30 and answer.error is None
    for x, y, w, h in boxes:
        assert all(in_tissue(px, py) for px in (x, x + w) for py in (y, y + h)), (x, y)
    assert len({x % 224 for x, *_ in boxes}) > 1  # anywhere, not on a grid


def test_patch_seeding(slide_path) -> None:
    """Same item and run: same patches; another item, run or experiment seed: other patches."""
    with ScriptedModelServer(rule=by_darkness) as server:
        exp = experiment(server, "patch", n_patches=6)
        first, again, other_run, other_item = asyncio.run(
            run(
                exp,
                (make_item(slide_path), 0),
                (make_item(slide_path), 0),
                (make_item(slide_path), 1),
                (make_item(slide_path, "18"), 0),
            )
        )
        (reseeded,) = asyncio.run(run(exp.model_copy(update={"seed": 5}), (make_item(slide_path), 0)))

    def boxes(answer):
        return [s.box for s in answer.steps if s.action == "patch"]

    assert len(boxes(first)) == 6 and boxes(again) == boxes(first)
    for different in (other_run, other_item, reseeded):
        assert set(map(tuple, boxes(different))) != set(map(tuple, boxes(first)))


def test_patch_panda_votes_grades_and_failures_keep_paid_steps(slide_path) -> None:
    panda = AgentItem("panda", "p1", 'Grade it as {"isup_grade": N}.', None, str(slide_path))
    replies = [Reply('{"isup_grade": 4}')] * 2 + [Reply('{"isup_grade": 0}')]
    with ScriptedModelServer(script=replies) as server:
        exp = experiment(server, "patch", n_patches=3)
        (answer,) = asyncio.run(run(exp, (panda, 0)))
    assert answer.text == '{"isup_grade": 4}'
    script = [Reply('{"answer": 1}'), Reply("bad request", status=400), Reply('{"answer": 1}')]
    with ScriptedModelServer(script=script) as server:
        exp = experiment(server, "patch", n_patches=3)
        (answer,) = asyncio.run(run(exp, (make_item(slide_path), 0)))
    assert answer.error is not None and "model call failed at patch" in answer.error
    assert [s.action for s in answer.steps] == ["patch", "patch", "error"]  # the two paid calls kept
    missing = make_item(slide_path.parent / "nope.tiff")
    with ScriptedModelServer() as server:
        (answer,) = asyncio.run(run(experiment(server, "thumbnail"), (missing, 0)))
    assert answer.error.startswith("slide unavailable") and server.requests == []


def test_registry_builds_the_baselines(slide_path) -> None:
    with ScriptedModelServer() as server:
        for mode, cls in (("thumbnail", ThumbnailAgent), ("patch", PatchAgent)):
            agent = make_agent(experiment(server, mode), pd.DataFrame(), None)
            assert isinstance(agent, cls) and agent.model == "scripted-vlm"
            asyncio.run(agent.aclose())
