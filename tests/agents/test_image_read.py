"""``image_read``: the exact path sends the protocol's pixels; fast reads one pyramid level coarser.

The images the agent sends to a loopback model are compared byte for byte with views rebuilt here
straight from OpenSlide (read_region at a named level, Lanczos, guides, JPEG 75).
"""

from __future__ import annotations

import asyncio
import base64
import io
from pathlib import Path

import openslide
import pytest
from PIL import Image

from giant_assets.agents.giant import GiantAgent
from giant_assets.agents.pricing import ModelPrice, PriceTable
from giant_assets.agents.providers import OpenAIResponsesModel, RetryPolicy
from giant_assets.demo.scripted import ScriptedModelServer, answer_reply, crop_reply
from giant_assets.experiments.spec import Experiment
from giant_assets.runs.agent_api import AgentItem
from giant_assets.slides.guides import draw_guides
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.support.slides import write_pyramidal_slide

KEY = "sk-image-read-test-00000000000000000001"
PRICES = PriceTable({"scripted-vlm": ModelPrice(input_per_mtok=1.0, output_per_mtok=1.0)})
CROP = (1024, 512, 2048, 1024)  # level-0 box: the exact path reads it at level 0 (2048 x 1024 px)


@pytest.fixture(scope="module", params=["slide.tiff", "slide.svs"])
def slide_path(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """4096 x 3072, levels 4096 / 2048 / 1024 / 512 px wide: zlib TIFF (read by OpenSlide) and JPEG SVS
    (read from its tiles by ``slides.tiles``)."""
    path = tmp_path_factory.mktemp("read") / request.param
    return write_pyramidal_slide(path, ONE_LESION_DESIGN, levels=4, svs=path.suffix == ".svs")


def _sent(slide: Path, monkeypatch: pytest.MonkeyPatch, **kwargs) -> tuple[list[bytes], list[int | None]]:
    """(overview JPEG, crop JPEG) the agent sends, and the levels its steps record."""
    monkeypatch.setenv("GIANT_READ_KEY", KEY)
    retry = RetryPolicy(max_attempts=2, base_delay_s=0.01, max_delay_s=0.02, max_total_wait_s=5)
    with ScriptedModelServer([crop_reply(*CROP), answer_reply("1")]) as srv:
        url = srv.openai_base_url
        model = OpenAIResponsesModel("scripted-vlm", base_url=url, api_key_env="GIANT_READ_KEY", retry=retry)
        agent = GiantAgent(model, prices=PRICES, image_size=1000, **kwargs)
        item = AgentItem("tcga", "i-1", "Which organ? 1. Lung 2. Liver", ["Lung", "Liver"], str(slide))

        async def go():
            try:
                return await agent.answer(item, 0)
            finally:
                await agent.aclose()

        answer = asyncio.run(go())
    assert answer.error is None, answer.error
    urls = [
        block["image_url"]
        for entry in srv.requests[1].json["input"]
        for block in entry.get("content") or entry.get("output") or []
        if isinstance(block, dict) and block.get("type") == "input_image"
    ]
    return [base64.b64decode(u.split(",", 1)[1]) for u in urls], [s.level for s in answer.steps]


def _rebuilt(slide: Path, box: tuple[int, int, int, int], level: int, size: tuple[int, int]) -> bytes:
    """The view of level-0 ``box`` read at ``level`` and shown at ``size``, from OpenSlide directly."""
    with openslide.OpenSlide(str(slide)) as s:
        ds = s.level_downsamples[level]
        read = s.read_region(box[:2], level, (round(box[2] / ds), round(box[3] / ds))).convert("RGB")
    image, _ = draw_guides(read.resize(size, Image.Resampling.LANCZOS), box)
    buf = io.BytesIO()
    image.save(buf, format="JPEG", quality=75)
    return buf.getvalue()


def test_exact_path_sends_the_protocol_levels(slide_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (overview, crop), levels = _sent(slide_path, monkeypatch)
    assert overview == _rebuilt(slide_path, (0, 0, 4096, 3072), 1, (1000, 750))
    assert crop == _rebuilt(slide_path, CROP, 0, (1000, 500))
    assert [lv for lv in levels if lv is not None] == [1, 0]


def test_fast_path_reads_one_level_coarser(slide_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (overview, crop), levels = _sent(slide_path, monkeypatch, image_read="fast")
    assert overview == _rebuilt(slide_path, (0, 0, 4096, 3072), 2, (1000, 750))  # 1024 x 768 read
    assert crop == _rebuilt(slide_path, CROP, 1, (1000, 500))  # 1024 x 512 read
    assert [lv for lv in levels if lv is not None] == [2, 1]
    assert overview != _rebuilt(slide_path, (0, 0, 4096, 3072), 1, (1000, 750))


def test_image_read_is_an_answer_setting_hashed_only_when_fast() -> None:
    base = Experiment(name="g", agent="giant", model="gpt-5")
    assert base.image_read == "exact" and "image_read" not in base.answer_settings()
    fast = base.model_copy(update={"image_read": "fast"})
    assert fast.answer_settings()["image_read"] == "fast"
    assert fast.config_hash() != base.config_hash()
    with pytest.raises(ValueError, match="image_read"):
        Experiment(name="g", agent="giant", model="gpt-5", image_read="quick")
