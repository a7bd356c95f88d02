"""The images a GIANT run's model was sent, made again through the agent's own code and checked against
the SHA-256 digests its trajectory recorded (``Step.image_sha256``).

The agent is built by ``agents.registry.make_giant_agent`` from the experiment, as a run builds it, so
the overview (``GiantAgent.overviews``: guides, size, encoding) and each crop (``GiantAgent.shown_region``:
``_crop``'s own path) come out byte for byte as sent, whatever those settings are. The model client is
pointed at an unused loopback address and never called: no key is needed and nothing leaves the machine.
A recorded box is replayed as the box shown (a ``random_patch`` run's random box included).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
from dataclasses import dataclass
from typing import Any

from giant_assets.core.interrupts import run_interruptible
from giant_assets.experiments.plugins import is_plugin
from giant_assets.experiments.spec import Experiment
from giant_assets.slides.access import open_slide

RENDER_URL = "http://127.0.0.1:9/never-called"  # the model client is built, never used
IMAGE_AGENTS = frozenset({"giant", "random_patch", "path_review"})
EXTENSIONS = {"image/jpeg": "jpg", "image/png": "png"}
PARALLEL = 4  # images rendered at once (OpenSlide reads, resampling and encoding release the GIL)


@dataclass(frozen=True)
class SentImage:
    """One image as the model received it, re-rendered, with the digest the trajectory recorded."""

    step: int  # the step's index in the trajectory
    kind: str  # "thumbnail" (the overview with guides) | "crop"
    data: bytes  # the encoded image, as sent
    media_type: str
    recorded_sha256: str | None  # None: the trajectory predates digests

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @property
    def verified(self) -> bool | None:
        """True: byte for byte the image sent; False: it differs (slide or code changed); None: unknown."""
        return None if self.recorded_sha256 is None else self.recorded_sha256 == self.sha256

    @property
    def extension(self) -> str:
        return EXTENSIONS.get(self.media_type, "img")


def renders_sent_images(experiment: Experiment | None) -> bool:
    """Whether the experiment's agent is one whose images can be re-rendered: GIANT's navigators, and
    plug-ins (their views are made by GIANT's code: ``agents/plugin_agent.py``)."""
    return experiment is not None and (experiment.agent in IMAGE_AGENTS or is_plugin(experiment.agent))


def _agent(experiment: Experiment):
    from giant_assets.agents.registry import make_giant_agent

    # the box recorded is the box shown: replay it as a plain crop, without drawing a random one
    return make_giant_agent(experiment.model_copy(update={"agent": "giant", "base_url": RENDER_URL}), None)


def _recorded(step: dict[str, Any]) -> str | None:
    digests = step.get("image_sha256") or []
    return str(digests[0]) if digests else None


async def _render(experiment: Experiment, wsi_path: str, runs: list[list[dict[str, Any]]]):
    agent = _agent(experiment)
    slide = await asyncio.to_thread(open_slide, wsi_path)
    slots = asyncio.Semaphore(PARALLEL)

    async def one(step: dict[str, Any]) -> SentImage | None:
        action = step.get("action")
        async with slots:
            if action == "thumbnail":
                part = (await agent.overviews.get(wsi_path)).part
            elif action == "crop" and step.get("box"):
                part = await agent.shown_region(slide, list(step["box"]))
            else:
                return None
        if part is None:
            return None
        data = base64.b64decode(part.data_b64)
        return SentImage(int(step["index"]), action, data, part.media_type, _recorded(step))

    try:
        out = []
        for steps in runs:
            images = await asyncio.gather(*(one(step) for step in steps))
            out.append([image for image in images if image is not None])
        return out
    finally:
        await asyncio.to_thread(slide.close)
        await agent.aclose()


def render_sent_images(
    experiment: Experiment, wsi_path: str, runs: list[list[dict[str, Any]]]
) -> list[list[SentImage]]:
    """Per run (its trajectory steps), the images its model was sent, in step order (blocking)."""
    return run_interruptible(_render(experiment, wsi_path, runs))
