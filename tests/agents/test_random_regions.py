"""The random-region ablation (``gpt5-random-patch``) against a loopback model on real pyramidal TIFFs:
the only tool is ``view_random_region()`` with no arguments, and every call shows a random tissue square
of at least 1000 level-0 px, seeded per (seed, item, run)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from giant_assets.agents.pricing import ModelPrice, PriceTable
from giant_assets.agents.registry import make_agent
from giant_assets.demo.scripted import Reply, ScriptedModelServer, answer_reply
from giant_assets.experiments.spec import Experiment
from giant_assets.runs.agent_api import AgentItem
from giant_assets.slides.synthetic import TISSUE, Blob, SlideDesign, render_level
from tests.support.slides import write_pyramidal_slide

KEY = "sk-regions-test-0000SECRET00000000000001"
TISSUE_BLOB = Blob(2048, 1536, 1600, 1200, TISSUE)  # 6.0 M px: above the tcga preset's 16 x 512^2
DESIGN = SlideDesign(4096, 3072, tissue=(TISSUE_BLOB,))
SPECK = SlideDesign(4096, 3072, tissue=(Blob(600, 600, 300, 300, TISSUE),))  # under a_t: no tissue piece
PRICES = PriceTable({"scripted-vlm": ModelPrice(input_per_mtok=1.0, output_per_mtok=1.0)})
VIEW = Reply("Another one.", calls=(("view_random_region", {}),))


@pytest.fixture(scope="module")
def slides(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("regions")
    return {  # levels at downsample 1 to 16: the segmentation reads the 256 x 192 level whole
        "tissue": write_pyramidal_slide(root / "t.tiff", DESIGN, levels=5),
        "speck": write_pyramidal_slide(root / "s.tiff", SPECK, levels=5),
    }


def run(srv: ScriptedModelServer, path: Path, run_index: int, monkeypatch: pytest.MonkeyPatch, **extra):
    monkeypatch.setenv("GIANT_REGIONS_KEY", KEY)
    exp = Experiment(
        name="rp", agent="random_patch", model="scripted-vlm", base_url=srv.openai_base_url,
        api_key_env="GIANT_REGIONS_KEY", **({"max_steps": 5, "seed": 3} | extra),
    )  # fmt: skip
    agent = make_agent(exp, pd.DataFrame(), None)
    agent.prices = PRICES
    item = AgentItem("tcga", "7", "Which organ? 1. Lung 2. Liver", ["Lung", "Liver"], str(path))

    async def go():
        try:
            return await agent.answer(item, run_index)
        finally:
            await agent.aclose()

    return asyncio.run(go())


def test_view_random_region_shows_tissue_squares(slides, monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedModelServer([VIEW, VIEW, VIEW, answer_reply("2")]) as srv:
        answer = run(srv, slides["tissue"], 0, monkeypatch)
    assert answer.error is None and answer.text == '{"answer": "2"}'
    first = srv.requests[0].json
    (tool,) = first["tools"]  # the only tool, with no arguments
    assert tool["name"] == "view_random_region" and tool["parameters"]["properties"] == {}
    system = first["input"][0]
    assert system["role"] == "system" and "view_random_region" in system["content"]
    assert "slide_zoom" not in system["content"]
    crops = [s for s in answer.steps if s.action == "crop"]
    assert len(crops) == 3 and all(s.requested_box is None for s in crops)
    tissue = render_level(DESIGN, 16).astype(int)
    painted = (tissue.max(axis=2) - tissue.min(axis=2)) > 30
    for s in crops:
        x, y, w, h = s.box
        assert w == h >= 1000 and x >= 0 and y >= 0 and x + w <= 4096 and y + h <= 3072
        assert painted[y // 16 : (y + h) // 16, x // 16 : (x + w) // 16].mean() > 0.25  # on tissue
        assert max(s.image_size) == 1000 and s.level is not None
    # each result: the square at 1000 px, detail high, and how many random regions are left (5 drawn)
    outputs = [i for i in srv.requests[-1].json["input"] if i.get("type") == "function_call_output"]
    assert [o["output"][1]["detail"] for o in outputs] == ["high"] * 3
    # calls left T - step - 1 (as the released reminder counts), squares left of the five drawn
    texts = [o["output"][0]["text"] for o in outputs]
    for text, calls, regions in zip(texts, (3, 2, 1), (4, 3, 2), strict=True):
        assert f"Function calls left: {calls}." in text and f"Random regions left to view: {regions}." in text
    assert [max(im.size) for im in srv.requests[-1].images] == [1000] * 4  # the overview and three squares


def test_every_call_of_a_reply_gets_a_region_until_none_is_left(slides, monkeypatch) -> None:
    """GPT's serving (every call of a reply): T = 3 draws three squares; four calls in one reply get
    three squares and a note that none is left."""
    four = Reply("Four at once.", calls=(("view_random_region", {}),) * 4)
    with ScriptedModelServer([four, answer_reply("1")]) as srv:
        answer = run(srv, slides["tissue"], 0, monkeypatch, max_steps=3)
    assert answer.error is None
    crops = [s for s in answer.steps if s.action == "crop"]
    assert [s.box is not None for s in crops] == [True, True, True, False]
    assert crops[-1].error == "no random regions left"
    outputs = [i for i in srv.requests[-1].json["input"] if i.get("type") == "function_call_output"]
    assert len(outputs) == 4 and "No random regions are left" in json.dumps(outputs[-1]["output"])
    assert len(srv.requests[-1].images) == 4  # the overview and three squares


def test_regions_are_seeded_per_run(slides, monkeypatch: pytest.MonkeyPatch) -> None:
    def boxes(run_index: int) -> list[list[int]]:
        with ScriptedModelServer([VIEW, answer_reply("1")]) as srv:
            answer = run(srv, slides["tissue"], run_index, monkeypatch)
        return [s.box for s in answer.steps if s.action == "crop"]

    first, again, other = boxes(0), boxes(0), boxes(1)
    assert first == again and first != other and len(first) == 1


def test_a_slide_without_a_qualifying_square_fails_before_any_call(slides, monkeypatch) -> None:
    with ScriptedModelServer([VIEW, answer_reply("1")]) as srv:
        answer = run(srv, slides["speck"], 0, monkeypatch)
    assert srv.requests == [] and answer.error.startswith("no random region to show on")
    assert "no tissue patches" in answer.error


def test_the_old_ablation_is_a_named_option_and_the_texts_are_hashed(monkeypatch) -> None:
    from giant_assets.experiments import prompts

    base = Experiment(name="rp", agent="random_patch", model="gpt-5")
    old = base.model_copy(update={"random_patch_tool": "slide_zoom"})
    assert base.random_patch_tool == "view_random_region" and old.config_hash() != base.config_hash()
    assert "random_region_texts_sha256" in base.answer_settings()
    before = base.config_hash()
    monkeypatch.setattr(prompts, "RANDOM_REGION_PROMPT", prompts.RANDOM_REGION_PROMPT + " ")
    assert base.config_hash() != before  # a changed text is a new result set
    assert np.unique([before, old.config_hash()]).size == 2


def test_view_random_region_needs_the_tool_protocol() -> None:
    with pytest.raises(ValueError, match="view_random_region' is a tool: use protocol 'tools'"):
        Experiment(name="rp", agent="random_patch", model="m", protocol="json")
    assert Experiment(
        name="rp", agent="random_patch", model="m", protocol="json", random_patch_tool="slide_zoom"
    )
