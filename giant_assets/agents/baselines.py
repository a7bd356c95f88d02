"""The paper's two non-navigating baselines over the same provider layer as GIANT.

- ``ThumbnailAgent``: one call with the whole slide at ``experiment.resolved_thumbnail_size`` (long side,
  never upsampled; no guide lines: the model cannot ask for regions, so coordinates would mean nothing).
  The reply text is the answer.
- ``PatchAgent``: ``experiment.n_patches`` random tissue patches of ``experiment.patch_size`` level-0
  pixels (tissue by Otsu on the overview, ``slides.tissue``), one call per patch, each reply's label
  extracted with ``eval.extraction.extract_label`` and majority-voted (``eval.voting``: ties go to the
  earliest patch). Patches are drawn from a generator seeded by (experiment seed, benchmark, item id,
  run index): a run is repeatable, other items and runs get other patches. Patches are sent at their
  native size (never upsampled; downscaled only if ``patch_size`` exceeds the provider's image size).

Every model call is one ``Step`` (box, level, image size, tokens, cost, latency); the patch agent ends
with an ``answer`` step (no call) holding the tally. The voted answer text is ``{"answer": N}``
(``{"isup_grade": N}`` for panda) so that extraction reads the voted label back.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import Counter
from collections.abc import Sequence

import numpy as np
import openslide

from giant_assets.agents.base import AgentAnswer, AgentItem, Step
from giant_assets.agents.overviews import Encoding, OverviewCache
from giant_assets.agents.pricing import PriceTable, load_price_table
from giant_assets.agents.providers import ChatModel, ImagePart, Message, ModelReply, ProviderError, TextPart
from giant_assets.batch.ratelimit import RateLimiter
from giant_assets.batch.records import SLIDE_UNAVAILABLE
from giant_assets.core.settings import PRICES_ENV, env
from giant_assets.eval.extraction import PANDA, extract_label
from giant_assets.eval.voting import majority_vote
from giant_assets.experiments.spec import Experiment
from giant_assets.slides.access import SlideError, open_slide
from giant_assets.slides.tissue import sample_patches, tissue_mask
from giant_assets.slides.views import region

PATCH_CONCURRENCY = 5  # patch calls of one item in flight at once (the shared limiter still paces them)

SYSTEM_PROMPT = (
    "You are an expert pathologist answering a question about a whole-slide image (WSI) of a tissue "
    "section. Look carefully at the image you are given and answer the question in exactly the format "
    "it asks for."
)
THUMBNAIL_NOTE = (
    "The image shows the whole slide ({width} x {height} pixels at full resolution), scaled down to "
    "{w} x {h} pixels."
)
PATCH_NOTE = (
    "The image is one {w} x {h} pixel patch of tissue at full resolution, taken at random from a "
    "whole-slide image of {width} x {height} pixels; it is all you can see of the slide."
)


class _SlideBaseline:
    """What both baselines share: the model, prices, slide errors, one model call as one Step."""

    name = ""

    def __init__(self, chat: ChatModel, experiment: Experiment, prices: PriceTable | None = None) -> None:
        self.chat = chat
        self.model = chat.name
        self.experiment = experiment
        self.prices = prices or load_price_table()

    async def aclose(self) -> None:
        await self.chat.aclose()

    async def answer(self, item: AgentItem, run_index: int) -> AgentAnswer:
        """Answer ``item``; failures come back as ``AgentAnswer.error``, never raised."""
        if not item.wsi_path:
            return _failed(
                [], f"slide unavailable: item {item.benchmark_id} has no resolved slide path", True
            )
        steps: list[Step] = []
        try:
            return await self._answer(item, run_index, steps)
        except SlideError as exc:  # missing, unreadable or not a slide: names the file
            return _failed(steps, f"slide unavailable: {exc}", True)
        except (openslide.OpenSlideError, OSError) as exc:
            return _failed(steps, f"slide unavailable: reading {item.wsi_path} failed: {exc}", True)

    async def _answer(self, item: AgentItem, run_index: int, steps: list[Step]) -> AgentAnswer:
        raise NotImplementedError

    async def _ask(self, item: AgentItem, note: str, image: ImagePart) -> ModelReply:
        """One call: the system prompt, then the note, the question and the image."""
        messages = [Message.system(SYSTEM_PROMPT), Message.user(TextPart(f"{note}\n\n{item.prompt}"), image)]
        return await self.chat.complete(messages)

    def _step(
        self, index: int, action: str, shown: tuple[Sequence[int], int, Sequence[int]], reply: ModelReply
    ) -> Step:
        """A call's step; ``shown`` is the level-0 box, pyramid level and pixel size of its image."""
        box, level, image_size = shown
        usage = reply.usage
        cost = self.prices.cost(
            self.model,
            usage.input_tokens,
            usage.output_tokens,
            cached_input_tokens=usage.cached_input_tokens,
            cache_write_tokens=usage.cache_write_tokens,
        )
        return Step(
            index,
            action,
            box=list(box),
            level=level,
            image_size=list(image_size),
            text=reply.text,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost_usd=cost.usd,
            latency_s=reply.latency_s,
            cached_input_tokens=usage.cached_input_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            reasoning_tokens=usage.reasoning_tokens,
            reasoning=reply.reasoning,
            http_attempts=reply.attempts,
        )


class ThumbnailAgent(_SlideBaseline):
    """One call with the whole slide; see the module docstring. The thumbnail is read once per slide
    file and ahead of the run (``agents/overviews.py``), as GIANT's overview is."""

    name = "thumbnail"

    def __init__(self, chat: ChatModel, experiment: Experiment, prices: PriceTable | None = None) -> None:
        super().__init__(chat, experiment, prices)
        size = experiment.resolved_thumbnail_size
        self.thumbnails = OverviewCache(size, Encoding(), guides=False, label=self.name)

    def prefetch(self, item: AgentItem) -> None:
        """Start reading ``item``'s thumbnail now, ahead of its runs (the batch runner calls this)."""
        self.thumbnails.prefetch(item.wsi_path)

    async def aclose(self) -> None:
        await self.thumbnails.aclose()
        await super().aclose()

    async def _answer(self, item: AgentItem, run_index: int, steps: list[Step]) -> AgentAnswer:
        thumb = await self.thumbnails.get(str(item.wsi_path))  # no slide handle of its own
        w, h = thumb.image_size
        note = THUMBNAIL_NOTE.format(width=thumb.width, height=thumb.height, w=w, h=h)
        try:
            reply = await self._ask(item, note, thumb.part)
        except ProviderError as exc:
            return _failed(steps, f"model call failed at step 0: {exc}")
        steps.append(self._step(0, "answer", (thumb.box, thumb.level, thumb.image_size), reply))
        return AgentAnswer(text=reply.text, steps=steps)


class PatchAgent(_SlideBaseline):
    """One call per random tissue patch, labels majority-voted; see the module docstring."""

    name = "patch"

    async def _answer(self, item: AgentItem, run_index: int, steps: list[Step]) -> AgentAnswer:
        slide = await asyncio.to_thread(open_slide, item.wsi_path)
        try:
            return await self._vote(slide, item, run_index, steps)
        finally:
            await asyncio.to_thread(slide.close)

    async def _vote(
        self, slide: openslide.OpenSlide, item: AgentItem, run_index: int, steps: list[Step]
    ) -> AgentAnswer:
        if item.benchmark_name != PANDA and not item.options:
            return _failed(steps, f"item {item.benchmark_id}: the patch baseline needs options to vote on")
        exp = self.experiment
        tissue = await asyncio.to_thread(tissue_mask, slide)
        rng = np.random.default_rng(patch_seed(exp.seed, item.benchmark_name, item.benchmark_id, run_index))
        boxes = sample_patches(tissue, exp.patch_size, exp.n_patches, rng)
        width, height = slide.dimensions
        gate = asyncio.Semaphore(PATCH_CONCURRENCY)

        async def one(index: int, box: tuple[int, int, int, int]) -> Step:
            async with gate:
                view = await asyncio.to_thread(region, slide, box, exp.resolved_image_size, False)
                note = PATCH_NOTE.format(
                    w=view.image.size[0], h=view.image.size[1], width=width, height=height
                )
                image = await asyncio.to_thread(Encoding().part, view.image, self.name)
                reply = await self._ask(item, note, image)
                return self._step(index, "patch", (view.box, view.level, view.image.size), reply)

        results = await asyncio.gather(*(one(i, box) for i, box in enumerate(boxes)), return_exceptions=True)
        steps.extend(r for r in results if isinstance(r, Step))  # paid calls stay in the trajectory
        failures = [r for r in results if not isinstance(r, Step)]
        for failure in failures:
            if not isinstance(failure, ProviderError):
                raise failure
        if failures:
            index = next(i for i, r in enumerate(results) if not isinstance(r, Step))
            return _failed(
                steps, f"model call failed at patch {index} ({len(failures)} failed): {failures[0]}"
            )
        labels = [
            extract_label(s.text, benchmark_name=item.benchmark_name, options=item.options).label
            for s in steps
        ]
        voted = majority_vote(labels)
        key = "isup_grade" if item.benchmark_name == PANDA else "answer"
        text = json.dumps({key: voted}) if voted is not None else ""
        steps.append(Step(len(steps), "answer", text=f"{text or 'no label'}; {_tally(labels)}"))
        return AgentAnswer(text=text, steps=steps)


def patch_seed(seed: int, benchmark: str, benchmark_id: str, run_index: int) -> int:
    """The patch generator's seed for one (experiment seed, item, run): stable across processes."""
    digest = hashlib.sha256(f"{seed}|{benchmark}|{benchmark_id}|{run_index}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _tally(labels: Sequence[int | None]) -> str:
    counts = Counter("none" if label is None else str(label) for label in labels)
    listed = ", ".join(f"{label}: {n}" for label, n in counts.most_common())
    return f"majority of {len(labels)} patch labels ({listed})"


def make_baseline_agent(experiment: Experiment, limiter: RateLimiter | None) -> ThumbnailAgent | PatchAgent:
    """The experiment's ``thumbnail`` or ``patch`` baseline over its provider; prices via ``GIANT_PRICES``."""
    from giant_assets.agents.providers import make_chat_model

    agents = {"thumbnail": ThumbnailAgent, "patch": PatchAgent}
    if experiment.agent not in agents:
        raise ValueError(f"agent {experiment.agent!r} is not a baseline; use one of {sorted(agents)}")
    prices = load_price_table(env(PRICES_ENV) or None)
    return agents[experiment.agent](make_chat_model(experiment, limiter), experiment, prices)


def _failed(steps: list[Step], message: str, slide_unavailable: bool = False) -> AgentAnswer:
    steps.append(Step(len(steps), "error", error=message))
    kind = SLIDE_UNAVAILABLE if slide_unavailable else None  # None: the runner's agent_error (retried)
    return AgentAnswer(text="", steps=steps, error=message, error_kind=kind)
