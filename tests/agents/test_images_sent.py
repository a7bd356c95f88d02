"""What GIANT sends of a slide, as recorded by a loopback server: the released code's encoding choices.

The overview goes without ``detail`` (the API's auto) and every crop at ``detail: high``; JPEGs are
encoded at Pillow's default quality 75 (the oracle: the quantisation tables Pillow writes for a JPEG
saved at that quality); ``overview_detail`` and ``image_quality`` change both, and the config hash.
"""

from __future__ import annotations

import asyncio
import base64
import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from giant_assets.agents.giant import GiantAgent
from giant_assets.agents.pricing import ModelPrice, PriceTable
from giant_assets.agents.providers import OpenAIChatModel, OpenAIResponsesModel, RetryPolicy
from giant_assets.demo.scripted import ScriptedModelServer, answer_reply, crop_reply
from giant_assets.experiments.spec import Experiment
from giant_assets.runs.agent_api import AgentItem
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.support.slides import write_pyramidal_slide

KEY = "sk-images-test-0000SECRET000000000000001"
FAST = RetryPolicy(max_attempts=2, base_delay_s=0.01, max_delay_s=0.02, max_total_wait_s=5)
PRICES = PriceTable({"scripted-vlm": ModelPrice(input_per_mtok=1.0, output_per_mtok=1.0)})


@pytest.fixture(scope="module")
def slide_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(tmp_path_factory.mktemp("sent") / "slide.tiff", ONE_LESION_DESIGN, levels=4)


def _run(srv: ScriptedModelServer, slide: Path, api: str, monkeypatch: pytest.MonkeyPatch, **kwargs) -> None:
    monkeypatch.setenv("GIANT_IMAGES_KEY", KEY)
    cls = OpenAIResponsesModel if api == "responses" else OpenAIChatModel
    agent = GiantAgent(
        cls("scripted-vlm", base_url=srv.openai_base_url, api_key_env="GIANT_IMAGES_KEY", retry=FAST),
        prices=PRICES,
        image_size=1000,
        **kwargs,
    )
    item = AgentItem("tcga", "i-1", "Which organ? 1. Lung 2. Liver", ["Lung", "Liver"], str(slide))

    async def go():
        try:
            return await agent.answer(item, 0)
        finally:
            await agent.aclose()

    answer = asyncio.run(go())
    assert answer.error is None, answer.error


def _images(body: dict, api: str) -> list[dict]:
    """The image blocks of a request body, in order, as (detail or None, JPEG bytes)."""
    found = []
    if api == "responses":
        for entry in body["input"]:
            for block in entry.get("content") or entry.get("output") or []:
                if isinstance(block, dict) and block.get("type") == "input_image":
                    found.append((block.get("detail"), block["image_url"]))
    else:
        for message in body["messages"]:
            for block in message["content"] if isinstance(message["content"], list) else []:
                if block.get("type") == "image_url":
                    found.append((block["image_url"].get("detail"), block["image_url"]["url"]))
    return [(detail, base64.b64decode(url.split(",", 1)[1])) for detail, url in found]


def _tables_at(quality: int, data: bytes) -> dict:
    """The quantisation tables Pillow writes for this image saved at ``quality``."""
    buf = io.BytesIO()
    Image.open(io.BytesIO(data)).convert("RGB").save(buf, format="JPEG", quality=quality)
    return Image.open(io.BytesIO(buf.getvalue())).quantization


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_overview_auto_crops_high_jpeg_75_by_default(
    slide_path: Path, api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ScriptedModelServer([crop_reply(1024, 512, 2048, 1024), answer_reply("1")]) as srv:
        _run(srv, slide_path, api, monkeypatch)
    (overview_detail, overview), (crop_detail, crop) = _images(srv.requests[1].json, api)
    assert overview_detail is None and crop_detail == "high"
    for data in (overview, crop):
        image = Image.open(io.BytesIO(data))
        assert image.format == "JPEG" and image.quantization == _tables_at(75, data)
        assert image.quantization != _tables_at(90, data)  # the platform's old quality


def test_overview_detail_and_quality_options(slide_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedModelServer([crop_reply(1024, 512, 2048, 1024), answer_reply("1")]) as srv:
        _run(srv, slide_path, "responses", monkeypatch, overview_detail="low", image_quality=90)
    (overview_detail, overview), (crop_detail, crop) = _images(srv.requests[1].json, "responses")
    assert (overview_detail, crop_detail) == ("low", "high")
    for data in (overview, crop):
        assert Image.open(io.BytesIO(data)).quantization == _tables_at(90, data)


def test_the_overview_carries_the_released_guides(slide_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sent overview (JPEG) has the red border and a black corner label box at its top left."""
    with ScriptedModelServer([answer_reply("1")]) as srv:
        _run(srv, slide_path, "responses", monkeypatch)
    ((_, overview),) = _images(srv.requests[0].json, "responses")
    pixels = np.asarray(Image.open(io.BytesIO(overview)).convert("RGB"), dtype=int)
    bottom = pixels[-1, 100:-100]  # the bottom edge, away from the corner label: red (JPEG-blurred)
    assert (bottom[:, 0] - bottom[:, 1:].max(axis=1)).min() > 60
    assert pixels[0:3, 0:30].mean() < 40  # the corner label's black box, above its text


def test_encoding_options_are_answer_settings() -> None:
    base = Experiment(name="g", agent="giant", model="gpt-5")
    assert base.overview_detail == "auto" and base.image_quality == 75
    hashes = {
        base.config_hash(),
        base.model_copy(update={"overview_detail": "high"}).config_hash(),
        base.model_copy(update={"image_quality": 90}).config_hash(),
    }
    assert len(hashes) == 3
