"""Every image a GIANT run sends is recorded by digest, and the viewer's re-render gives the very bytes.

The oracle is the wire: the loopback model server decodes the images it received, and their SHA-256
must equal both the trajectory's ``image_sha256`` and the re-rendered image's.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from giant_assets.agents.registry import make_giant_agent
from giant_assets.demo.scripted import Reply, ScriptedModelServer, answer_reply, crop_reply
from giant_assets.experiments.spec import Experiment
from giant_assets.report.sent_images import render_sent_images
from giant_assets.runs.agent_api import AgentItem
from giant_assets.runs.records import steps_frame
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.support.slides import write_pyramidal_slide

KEY_ENV = "GIANT_TEST_SENT_KEY"
# the second crop reaches outside the slide: the clipped box is what was shown and is replayed
SCRIPT = [crop_reply(1024, 512, 2048, 1024), crop_reply(3800, 2900, 600, 600), answer_reply("2")]
# the random-region ablation's only tool takes no arguments: the agent draws the region
RANDOM = Reply("Another one.", calls=(("view_random_region", {}),))
SCRIPTS = {"giant": SCRIPT, "random_patch": [RANDOM, RANDOM, answer_reply("2")]}


@pytest.fixture(scope="module")
def slide_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(tmp_path_factory.mktemp("sent") / "slide.tiff", ONE_LESION_DESIGN, levels=4)


def run_once(experiment: Experiment, slide: Path) -> tuple[list[dict], list[bytes]]:
    """One run against the scripted model: its steps (as stored) and the image bytes the server received."""

    async def go(url: str):
        agent = make_giant_agent(experiment.model_copy(update={"base_url": url}), None)
        try:
            item = AgentItem("tcga", "1", "Which organ?", ["Lung", "Liver"], str(slide))
            return await agent.answer(item, 0)
        finally:
            await agent.aclose()

    with ScriptedModelServer(list(SCRIPTS[experiment.agent])) as srv:
        answer = asyncio.run(go(srv.openai_base_url))
    last = srv.requests[-1]  # the whole conversation: overview, then each crop
    received = [b for turn in last.turns for b in turn.images]
    return answer.steps_as_dicts(), received


@pytest.mark.parametrize("agent", ["giant", "random_patch"])
def test_rerendered_images_have_the_digests_recorded_and_sent(
    slide_path: Path, monkeypatch: pytest.MonkeyPatch, agent: str
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-sent-test")
    experiment = Experiment(
        name="sent", agent=agent, model="scripted-vlm", api_key_env=KEY_ENV, image_size=500, max_steps=4
    )
    steps, received = run_once(experiment, slide_path)
    sent = [s for s in steps if s["action"] in ("thumbnail", "crop")]
    assert [s["action"] for s in sent] == ["thumbnail", "crop", "crop"] and len(received) == 3
    recorded = [s["image_sha256"] for s in sent]
    assert recorded == [[hashlib.sha256(b).hexdigest()] for b in received]
    assert all(s["image_sha256"] == [] for s in steps if s["action"] == "answer")

    # the viewer's re-render, through the agent's own code, with nothing listening at the model's URL
    (images,) = render_sent_images(experiment, str(slide_path), [steps])
    assert [(i.step, i.kind) for i in images] == [(s["index"], s["action"]) for s in sent]
    assert [i.data for i in images] == received
    assert all(i.verified for i in images) and images[0].extension == "jpg"

    # the check can fail: another image size renders other bytes, and says so
    other = experiment.model_copy(update={"image_size": 250})
    (changed,) = render_sent_images(other, str(slide_path), [steps])
    assert [i.verified for i in changed] == [False, False, False]

    # the trajectory_steps table carries the digests too
    run = {"config_hash": "h", "benchmark_name": "tcga", "benchmark_id": "1", "run_index": 0}
    frame = steps_frame(pd.DataFrame([run | {"trajectory_json": json.dumps(steps)}]))
    assert frame["image_sha256"].dropna().tolist() == [d[0] for d in recorded]
