"""The paper's two non-navigating baselines over the same provider layer as GIANT, as the released runs
made them: the question's prompt and one image in one user turn, no system prompt, no image ``detail``
(the API's auto).

- ``ThumbnailAgent``: one call with the whole slide at ``experiment.thumbnail_size`` (default
  1024; ``views.thumbnail_view``: OpenSlide's ``get_thumbnail`` up to 1024 px, the GIANT overview reader
  above it; no guide lines). The reply text is the answer.
- ``PatchAgent``: ``experiment.n_patches`` (30) patches of ``experiment.patch_size`` (224) level-0 pixels
  drawn without replacement (all of them when there are fewer) from the slide's patch grid, one call per
  patch, each read at level 0 and sent at its native size; each reply's label extracted with
  ``eval.extraction.extract_label`` and majority-voted (``eval.voting``: ties go to the earliest patch).
  ``patch_sampler: clam`` (default) is the released grid (``slides.clam``, the benchmark's CLAM preset:
  ``panda`` for PANDA, ``tcga`` otherwise); ``otsu`` keeps the platform's earlier sampler (patches
  anywhere on Otsu's tissue mask of the overview, ``slides.tissue``). Patches are drawn from a generator
  seeded by (experiment seed, benchmark, item id, run index): a run is repeatable, other items and runs
  get other patches.

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
from dataclasses import replace

import numpy as np
import openslide

from giant_assets.agents.giant import reply_step
from giant_assets.agents.overviews import Encoding, OverviewCache
from giant_assets.agents.pricing import PriceTable, experiment_prices
from giant_assets.agents.providers import ChatModel, ImagePart, Message, ModelReply, ProviderError, TextPart
from giant_assets.eval.voting import majority_vote
from giant_assets.experiments.prompts import resolve_prompts
from giant_assets.experiments.spec import Experiment
from giant_assets.runs.agent_api import AgentAnswer, AgentItem, Step
from giant_assets.runs.extraction import PANDA, extract_label
from giant_assets.runs.ratelimit import RateLimiter
from giant_assets.runs.records import SLIDE_UNAVAILABLE
from giant_assets.slides.access import SlideError, open_slide
from giant_assets.slides.clam import clam_patches, load_preset, preset_for
from giant_assets.slides.tissue import sample_patches, tissue_mask
from giant_assets.slides.views import SlideView, region, thumbnail_view

PATCH_CONCURRENCY = 5  # patch calls of one item in flight at once (the shared limiter still paces them)


class _SlideBaseline:
    """What both baselines share: the model, prices, slide errors, one model call as one Step."""

    name = ""

    def __init__(self, chat: ChatModel, experiment: Experiment, prices: PriceTable | None = None) -> None:
        self.chat = chat
        self.model = chat.name
        self.experiment = experiment
        self.prices = prices or experiment_prices(experiment)
        self.prompts = resolve_prompts(experiment.prompt_file, experiment.prompt_path)

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

    async def _ask(self, item: AgentItem, image: ImagePart) -> ModelReply:
        """One call: the question's prompt and the image in one user turn, nothing else."""
        text = self.prompts.first_turn(item.benchmark_name, item.prompt, item.question, item.options)
        return await self.chat.complete([Message.user(TextPart(text), image)])

    def _step(
        self, index: int, action: str, shown: tuple[Sequence[int], int, Sequence[int]], reply: ModelReply
    ) -> Step:
        """A call's step; ``shown`` is the level-0 box, pyramid level and pixel size of its image."""
        box, level, image_size = shown
        step = reply_step(index, action, reply, self.model, self.prices)
        step.box, step.level, step.image_size = list(box), level, list(image_size)
        return step


class ThumbnailAgent(_SlideBaseline):
    """One call with the whole slide; see the module docstring. The thumbnail is read once per slide
    file and ahead of the run (``agents/overviews.py``), as GIANT's overview is."""

    name = "thumbnail"

    def __init__(self, chat: ChatModel, experiment: Experiment, prices: PriceTable | None = None) -> None:
        super().__init__(chat, experiment, prices)
        size = experiment.thumbnail_size
        encoding = Encoding(quality=experiment.image_quality)
        self.thumbnails = OverviewCache(size, encoding, guides=False, label=self.name, view=thumbnail_view)

    def prefetch(self, item: AgentItem) -> None:
        """Start reading ``item``'s thumbnail now, ahead of its runs (the batch runner calls this)."""
        self.thumbnails.prefetch(item.wsi_path)

    async def aclose(self) -> None:
        await self.thumbnails.aclose()
        await super().aclose()

    async def _answer(self, item: AgentItem, run_index: int, steps: list[Step]) -> AgentAnswer:
        thumb = await self.thumbnails.get(str(item.wsi_path))  # no slide handle of its own
        try:
            reply = await self._ask(item, thumb.part)
        except ProviderError as exc:
            failed = _failed(steps, f"model call failed at step 0: {exc}")
            failed.error_kind = exc.error_kind or failed.error_kind  # e.g. content_filtered
            return failed
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
        rng = np.random.default_rng(patch_seed(exp.seed, item.benchmark_name, item.benchmark_id, run_index))
        boxes = await asyncio.to_thread(self._boxes, slide, item, rng)
        if not boxes:
            return _failed(steps, f"item {item.benchmark_id}: no tissue patches found on {item.wsi_path}")
        encoding = Encoding(quality=exp.image_quality)
        # batch mode: every patch's call joins the same round (a gate would spread them over rounds)
        gate = asyncio.Semaphore(len(boxes) if getattr(self.chat, "batch", None) else PATCH_CONCURRENCY)

        async def one(index: int, box: tuple[int, int, int, int]) -> Step:
            async with gate:
                view = await asyncio.to_thread(self._read, slide, box)
                image = await asyncio.to_thread(encoding.part, view.image, self.name)
                reply = await self._ask(item, image)
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

    def _boxes(
        self, slide: openslide.OpenSlide, item: AgentItem, rng: np.random.Generator
    ) -> list[tuple[int, int, int, int]]:
        """The item's patches: drawn without replacement from the CLAM grid, or on Otsu's mask."""
        exp = self.experiment
        if exp.patch_sampler == "otsu":
            return sample_patches(tissue_mask(slide), exp.patch_size, exp.n_patches, rng)
        params = replace(load_preset(preset_for(item.benchmark_name)), patch_size=exp.patch_size)
        coords = clam_patches(slide, params)
        picks = rng.choice(len(coords), size=min(exp.n_patches, len(coords)), replace=False)
        return [(int(coords[i, 0]), int(coords[i, 1]), exp.patch_size, exp.patch_size) for i in picks]

    def _read(self, slide: openslide.OpenSlide, box: tuple[int, int, int, int]) -> SlideView:
        """A CLAM patch read whole at level 0 (past the slide's edge: black, as OpenSlide's transparent
        pixels converted to RGB); an Otsu patch as before (native size, never upsampled)."""
        if self.experiment.patch_sampler == "otsu":
            return region(slide, box, self.experiment.resolved_image_size, False)
        x, y, w, h = box
        image = slide.read_region((x, y), 0, (w, h)).convert("RGB")
        return SlideView(image, box, 0, 1.0, False, (w, h))


def patch_seed(seed: int, benchmark: str, benchmark_id: str, run_index: int) -> int:
    """The patch generator's seed for one (experiment seed, item, run): stable across processes."""
    digest = hashlib.sha256(f"{seed}|{benchmark}|{benchmark_id}|{run_index}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _tally(labels: Sequence[int | None]) -> str:
    counts = Counter("none" if label is None else str(label) for label in labels)
    listed = ", ".join(f"{label}: {n}" for label, n in counts.most_common())
    return f"majority of {len(labels)} patch labels ({listed})"


def make_baseline_agent(experiment: Experiment, limiter: RateLimiter | None) -> ThumbnailAgent | PatchAgent:
    """The experiment's ``thumbnail`` or ``patch`` baseline over its provider, priced by
    ``pricing.experiment_prices``."""
    from giant_assets.agents.providers import make_chat_model

    agents = {"thumbnail": ThumbnailAgent, "patch": PatchAgent}
    if experiment.agent not in agents:
        raise ValueError(f"agent {experiment.agent!r} is not a baseline; use one of {sorted(agents)}")
    prices = experiment_prices(experiment)
    return agents[experiment.agent](make_chat_model(experiment, limiter), experiment, prices)


def _failed(steps: list[Step], message: str, slide_unavailable: bool = False) -> AgentAnswer:
    steps.append(Step(len(steps), "error", error=message))
    kind = SLIDE_UNAVAILABLE if slide_unavailable else None  # None: the runner's agent_error (retried)
    return AgentAnswer(text="", steps=steps, error=message, error_kind=kind)
