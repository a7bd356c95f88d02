"""The demo policy on the real sample slides, through the real agents and SDKs: GIANT's crop of the lesion
is readable, the 1024 px thumbnail is not, so only GIANT gets the sample's answers."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import numpy as np
import openslide
import pytest
from scipy import ndimage

from giant_assets.agents.baselines import ThumbnailAgent
from giant_assets.agents.giant import GiantAgent
from giant_assets.agents.pricing import ModelPrice, PriceTable
from giant_assets.agents.providers import OpenAIResponsesModel
from giant_assets.demo.scripted import DEMO_MODEL, ScriptedModelServer, demo_policy, policy
from giant_assets.demo.scripted.answer_key import key_answer
from giant_assets.demo.scripted.policy import READABLE_DARK, _dark_fraction, square_opening
from giant_assets.experiments.declared import load_experiments
from giant_assets.experiments.spec import Experiment
from giant_assets.multipathqa.loading import parse_items, read_csv_strings
from giant_assets.multipathqa.sample import sample_csv_path
from giant_assets.runs.agent_api import AgentAnswer, AgentItem
from giant_assets.runs.extraction import extract_label
from giant_assets.slides.access import encode_image
from giant_assets.slides.views import overview

REPO = Path(__file__).resolve().parents[2]
PRICES = PriceTable({"scripted-vlm": ModelPrice(input_per_mtok=0.0, output_per_mtok=0.0)})
# two gtex items ask the same question of two slides: the lesion's place tells the answers apart
GTEX = {"GTEX-1117F-0126": "gtex/GTEX-1117F-0126.tiff", "GTEX-111CU-1826": "GTEX-111CU-1826.tiff"}


def gtex_items(root: Path) -> list[tuple[AgentItem, int]]:
    items, _ = parse_items(read_csv_strings(sample_csv_path()), "sample")
    rows = items[items.benchmark_id.isin(list(GTEX))]
    return [
        (
            AgentItem("gtex", r.benchmark_id, r.prompt, list(r.options), str(root / GTEX[r.benchmark_id])),
            r.truth_label,
        )
        for r in rows.itertuples()
    ]


def labels(answers: list[AgentAnswer], items: list[tuple[AgentItem, int]]) -> list[int | None]:
    return [
        extract_label(a.text, benchmark_name="gtex", options=it.options).label
        for a, (it, _) in zip(answers, items, strict=True)
    ]


def run(agent, items: list[AgentItem]) -> list[AgentAnswer]:
    async def go():
        try:
            return [await agent.answer(it, 0) for it in items]
        finally:
            await agent.aclose()

    return asyncio.run(go())


def chat(server: ScriptedModelServer) -> OpenAIResponsesModel:
    return OpenAIResponsesModel("scripted-vlm", base_url=server.openai_base_url)


def last_images(server: ScriptedModelServer) -> list[bytes]:
    """The last image of each request that got an answer (not a crop)."""
    return [
        [b for t in r.turns for b in t.images][-1]
        for r, reply in zip(server.requests, server.replies, strict=True)
        if reply.answer is not None
    ]


def test_giant_reads_the_lesion_and_the_thumbnail_does_not(sample_wsi_root: Path) -> None:
    items = gtex_items(sample_wsi_root)
    assert len(items) == 2 and items[0][1] != items[1][1]
    with ScriptedModelServer(rule=demo_policy) as server:
        giant = run(GiantAgent(chat(server), prices=PRICES, image_size=1000), [it for it, _ in items])
        crops = last_images(server)
    thumbnail_exp = Experiment(name="t", agent="thumbnail", model="scripted-vlm")
    with ScriptedModelServer(rule=demo_policy) as server:
        thumbs = run(ThumbnailAgent(chat(server), thumbnail_exp, PRICES), [it for it, _ in items])
        thumbnails = last_images(server)
    crop_dark = [_dark_fraction(b) for b in crops]
    thumb_dark = [_dark_fraction(b) for b in thumbnails]
    # measured: crops 0.19 and 0.20, thumbnails ~0.01: READABLE_DARK (0.08) sits between, with margin
    assert min(crop_dark) >= 2 * READABLE_DARK and max(thumb_dark) <= READABLE_DARK / 3, (
        crop_dark,
        thumb_dark,
    )
    assert [s.action for s in giant[0].steps] == ["thumbnail", "crop", "answer"]
    truths = [truth for _, truth in items]
    assert labels(giant, items) == truths  # each slide its own answer
    assert all(g is not None and g != t for g, t in zip(labels(thumbs, items), truths, strict=True))


def test_a_question_outside_the_sample_is_guessed_even_when_readable(sample_wsi_root: Path) -> None:
    prompt = 'Which organ?\n1. Lung\n2. Liver\n3. Skin\nAnswer as JSON {"answer": N}.'
    assert key_answer(prompt) is None
    item = AgentItem(
        "gtex", "own", prompt, ["Lung", "Liver", "Skin"], str(sample_wsi_root / GTEX["GTEX-1117F-0126"])
    )
    with ScriptedModelServer(rule=demo_policy) as server:
        (answer,) = run(GiantAgent(chat(server), prices=PRICES, image_size=1000), [item])
        (crop,) = last_images(server)
    assert _dark_fraction(crop) >= READABLE_DARK and answer.steps[-1].report.startswith("Based on")


def test_a_shared_question_needs_the_lesion_s_place() -> None:
    (item, truth), (other, other_truth) = gtex_items(Path("/nowhere"))
    assert key_answer(item.prompt) is None  # two slides, two answers: the question alone is not enough
    assert key_answer(item.prompt, at=(2800, 1100), size=(4096, 3072)) == truth  # GTEX-1117F's lesion
    assert key_answer(item.prompt, at=(1200, 1900), size=(4096, 3072)) == other_truth  # GTEX-111CU's
    assert key_answer(item.prompt, at=(2800, 1100), size=(8192, 6144)) is None  # another slide


def test_the_demo_experiments_name_the_policy_s_model() -> None:
    declared = load_experiments(REPO / "experiments.yaml")
    models = {declared[n].model for n in ("demo-giant", "demo-thumbnail", "demo-patch", "demo-path-review")}
    assert models == {DEMO_MODEL}


@pytest.mark.parametrize("size", [1, 3, 5, 7])
def test_the_separable_opening_removes_what_scipys_opening_removes(size: int) -> None:
    """The oracle: SciPy's binary opening with a size x size square (outside the image is background), on
    random masks of every density, empty and one-pixel images, masks thinner than the square."""
    rng = np.random.default_rng(size)
    square = np.ones((size, size), bool)
    shapes = [(0, 4), (1, 1), (2, 9), (size, size), (37, 53), (300, 211)]
    for shape in shapes:
        for density in (0.05, 0.5, 0.9, 0.99, 1.0):
            mask = rng.random(shape) < density
            want = ndimage.binary_opening(mask, structure=square)
            got = square_opening(mask, size)
            assert got.dtype == bool and got.shape == mask.shape
            np.testing.assert_array_equal(got, want, err_msg=f"{shape} at {density}")


@pytest.mark.parametrize("size", [0, 2, 4, -3])
def test_an_even_or_empty_square_is_refused(size: int) -> None:
    with pytest.raises(ValueError, match="positive odd"):
        square_opening(np.ones((4, 4), bool), size)


def test_the_findings_of_an_image_are_kept_per_question_and_equal_a_fresh_look(sample_wsi_root: Path) -> None:
    """The overview a run is sent is looked at again at its answer (and by every run of the item): the
    kept findings are those of a fresh look, per question (whole overview, or an area of it)."""
    slide = openslide.OpenSlide(str(sample_wsi_root / GTEX["GTEX-111CU-1826"]))
    try:
        jpeg = base64.b64decode(encode_image(overview(slide, 1000).image))
    finally:
        slide.close()
    whole = "The slide is 4096 x 3072 level-0 pixels."
    area = whole + " It occupies image pixels x 0..500, y 0..300 of the overview."
    blob, share, looks = policy._largest_dark_blob, policy._dark_share, []

    def counted(look):
        def counting(*args):
            looks.append(look)
            return look(*args)

        return counting

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(policy, "_FINDINGS", policy.ImageFindings(size=2))
        fresh = {question: policy._dark_region_box(question, jpeg) for question in (whole, area)}
        assert fresh[whole] != fresh[area]  # another blob in the area: the area is part of the key
        mp.setattr(policy, "_FINDINGS", policy.ImageFindings(size=2))
        mp.setattr(policy, "_largest_dark_blob", counted(blob))
        mp.setattr(policy, "_dark_share", counted(share))
        for _ in range(3):
            assert {q: policy._dark_region_box(q, jpeg) for q in (whole, area)} == fresh
        assert looks == [blob, blob]  # one look per question, however often asked
        assert policy._dark_fraction(jpeg) == share(jpeg) and looks[-1] is share
        assert policy._dark_region_box(whole, jpeg) == fresh[whole]  # the oldest was let go (size 2)
        assert looks == [blob, blob, share, blob]
