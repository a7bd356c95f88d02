"""GIANT: a multimodal model navigates a whole-slide image, as the paper's released code runs it.

One run of an item:

1. The system prompt (``prompts.PromptSet``: the built-in texts or a ``prompt_file``) states the
   slide's level-0 size and the step budget; the first user turn is the question and an overview of
   the whole slide (long side ``image_size``, labelled level-0 guides), nothing else. The
   ``slide_zoom(x0, y0, w, h)`` tool (and, with ``note_tool``, ``note(observation)``) is offered at
   every step; with T = 1 no tool is offered and the single-step prompt is sent.
2. Each model call is one step; ``max_steps`` T counts them all, the final answer included. A tool
   result carries the region and the reminder of the function calls left (T - step - 1). With
   ``serve_calls="all"`` (the official GPT agent) every call of a reply is served, with ``"first"``
   (the official Claude agent) only the first, the others answered with an error text. A reply
   without a tool call is the final answer, ``<report>...</report><response>...</response>`` (the
   response goes to answer extraction; without tags the whole text does, ``response_tagged`` says so).
3. A tool call at step T means no answer: the run starts again from scratch, up to ``max_attempts``
   attempts in all; then the run fails with error kind ``max_retries_exceeded``. An attempt longer
   than ``attempt_timeout_s`` ends the run with error kind ``timeout``. Every attempt is in the
   trajectory (``Step.attempt``) and in the cost.
4. ``max_images_in_context`` K keeps the overview and the K-1 newest zoomed images; older images
   leave the conversation, their text (and the notes) stay. As the official Claude agent's pruning
   never looks inside tool results, ``prune_tool_images=False`` (Anthropic) keeps every crop.

``protocol="json"`` keeps the free-JSON actions for models without tool calling. ``random_regions`` is
the paper's random-region ablation (``agents.random_regions``: the tool ``view_random_region()`` shows
random tissue squares); ``random_crops`` the platform's earlier version of it (``slide_zoom`` kept, the
requested box moved to a random place, glass included).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import numpy as np
import openslide

from giant_assets.agents.overviews import Encoding, Overview, OverviewCache
from giant_assets.agents.pricing import PriceTable, load_price_table
from giant_assets.agents.providers import (
    ChatModel,
    ImagePart,
    Message,
    ModelReply,
    ProviderError,
    TextPart,
    ToolCall,
    ToolSpec,
)
from giant_assets.agents.random_regions import (
    VIEW_RANDOM_REGION,
    RegionQueue,
    draw_queue,
    region_seed,
    tissue_coords,
)
from giant_assets.agents.shown_views import ShownView, ShownViews
from giant_assets.core.jsonscan import scan_objects
from giant_assets.experiments.prompts import (
    BUILT_IN,
    NO_REGIONS_LEFT,
    RANDOM_REGION_PROMPT,
    RANDOM_REGION_RESULT,
    PromptSet,
)
from giant_assets.runs.agent_api import AgentAnswer, AgentItem, Step
from giant_assets.slides.access import JPEG_QUALITY, InvalidRegion, SlideError, open_slide
from giant_assets.slides.random_regions import NoTissueRegion
from giant_assets.slides.views import IMAGE_READS, overview, region

MAX_RETRIES_EXCEEDED = "max_retries_exceeded"
TIMEOUT = "timeout"  # the batch records' error kind for a run that ran out of time
SERVE_CALLS = ("all", "first")
OFFICIAL_ATTEMPT_TIMEOUT_S = 900.0

ZOOM, NOTE = "slide_zoom", "note"


def zoom_spec(p: PromptSet) -> ToolSpec:
    """``slide_zoom(x0, y0, w, h)``, integers in level-0 pixels, described in the prompt set's words."""
    described = (("x0", p.zoom_x0), ("y0", p.zoom_y0), ("w", p.zoom_w), ("h", p.zoom_h))
    return ToolSpec(
        name=ZOOM,
        description=p.zoom_description.format(),
        parameters={
            "type": "object",
            "properties": {k: {"type": "integer", "description": d.format()} for k, d in described},
            "required": ["x0", "y0", "w", "h"],
            "additionalProperties": False,
        },
    )


def note_spec(p: PromptSet) -> ToolSpec:
    """``note(observation)``: the official agent's notes, kept in context when images are pruned."""
    return ToolSpec(
        name=NOTE,
        description=p.note_description.format(),
        parameters={
            "type": "object",
            "properties": {"observation": {"type": "string", "description": p.note_observation.format()}},
            "required": ["observation"],
            "additionalProperties": False,
        },
    )


JSON_SYSTEM_PROMPT = """\
You are a pathologist examining a whole-slide image of {width} x {height} pixels at full resolution \
(level 0) to answer a question about it. You first see an overview of the whole slide; green guide \
lines, four per axis, are labelled with level-0 coordinates on every image you get.

Reply to every message with exactly one JSON object:
- to look closer: {{"action": "crop", "x": <int>, "y": <int>, "w": <int>, "h": <int>}}, a region in \
level-0 pixels (x, y its top-left corner); it comes back at most {image_size} pixels on its long side.
- to answer: {{"action": "answer", "answer": <your answer, in exactly the format the question asks \
for>}}.
You have {max_steps} replies in all, including the answer, so at most {analysis_steps} crops."""

RAW_FINAL = "no JSON answer at the final step; the raw reply is used as the answer"
NO_ANSWER = "tool call at the last step: no answer in this attempt"
_TAG = re.compile(r"<(/?)(response|report)>", re.IGNORECASE)
_FORMAT_HINT = (
    'Reply with one JSON object: {"action": "crop", "x": .., "y": .., "w": .., "h": ..} in level-0 pixels, '
    'or {"action": "answer", "answer": ..}.'
)


@dataclass(frozen=True)
class Action:
    """A free-JSON protocol action."""

    kind: str  # "crop" | "answer"
    box: list[Any] | None = None  # as the model wrote it, validated only when cropping
    answer: str = ""


def parse_action(text: str) -> Action | None:
    """The last JSON object in ``text`` that reads as a crop or an answer; None if there is none, or
    when the reply ends in an object cut short after it (its final action lost, never an earlier one)."""
    scan = scan_objects(text)
    for found in reversed(scan.objects):
        try:
            action = _classify(found.value)
        except RecursionError:  # an answer value nested too deep to write back as JSON
            continue
        if action is not None:
            return None if any(start >= found.end for start in scan.cut_off) else action
    return None


def split_answer(text: str) -> tuple[str, str, bool]:
    """(response, report, tagged): the last ``<response>`` text, or the whole text when it has none."""
    responses, reports = _tagged(text, "response"), _tagged(text, "report")
    report = reports[-1].strip() if reports else ""
    if responses:
        return responses[-1].strip(), report, True
    return text.strip(), report, False


def prune_images(messages: list[Message], keep: int | None, tool_images: bool = True) -> list[Message]:
    """The conversation as the official agent prunes it: the overview (the first message with an image)
    always stays, and of the later images the newest ``keep - 1``; older ones leave, their text stays.
    ``tool_images=False`` (the official Claude agent) counts and prunes no image of a tool result."""
    if keep is None:
        return messages
    holders = [i for i, m in enumerate(messages) if m.images and (tool_images or m.role != "tool")]
    later = holders[1:]
    drop = set(later[: max(0, len(later) - (keep - 1))])
    return [
        replace(m, parts=tuple(p for p in m.parts if not isinstance(p, ImagePart))) if i in drop else m
        for i, m in enumerate(messages)
    ]


class GiantAgent:
    """Navigates one slide per item with a multimodal chat model; see the module docstring."""

    def __init__(
        self,
        model: ChatModel,
        *,
        max_steps: int = 20,
        max_attempts: int = 4,
        image_size: int = 1000,
        protocol: str = "tools",
        max_images_in_context: int | None = None,
        prune_tool_images: bool = True,
        prompts: PromptSet | None = None,
        note_tool: bool = False,
        serve_calls: str = "all",
        attempt_timeout_s: float | None = OFFICIAL_ATTEMPT_TIMEOUT_S,
        prices: PriceTable | None = None,
        image_format: str = "JPEG",
        image_quality: int = JPEG_QUALITY,
        image_read: str = "exact",
        overview_detail: str | None = None,
        random_crops: bool = False,
        random_regions: bool = False,
        seed: int = 0,
        name: str = "giant",
    ) -> None:
        if max_steps < 1 or max_attempts < 1:
            raise ValueError(f"max_steps and max_attempts must be >= 1, got {max_steps}, {max_attempts}")
        if protocol not in ("tools", "json"):
            raise ValueError(f"protocol must be 'tools' or 'json', got {protocol!r}")
        if serve_calls not in SERVE_CALLS:
            raise ValueError(f"serve_calls must be one of {SERVE_CALLS}, got {serve_calls!r}")
        self.chat = model
        self.model = model.name
        self.name = name
        self.max_steps = max_steps
        self.max_attempts = max_attempts
        self.image_size = image_size
        self.protocol = protocol
        self.max_images_in_context = max_images_in_context
        self.prune_tool_images = prune_tool_images
        if random_regions and protocol != "tools":
            raise ValueError("random_regions needs protocol 'tools' (view_random_region is a tool)")
        self.prompts = prompts or BUILT_IN
        self.note_tool = note_tool and protocol == "tools"
        self.serve_calls = serve_calls
        self.attempt_timeout_s = attempt_timeout_s
        self.prices = prices or load_price_table()
        # as the released code: the overview with no ``detail`` (the API's auto), every crop at high
        self.crop_encoding = Encoding(image_format, image_quality, "high")
        self.random_crops = random_crops
        self.random_regions = random_regions
        self.seed = seed
        if image_read not in IMAGE_READS:
            raise ValueError(f"image_read must be one of {IMAGE_READS}, got {image_read!r}")
        self.image_read = image_read
        self.overviews = OverviewCache(
            image_size,
            replace(self.crop_encoding, detail=overview_detail),
            view=partial(overview, image_read=image_read),
        )
        self.shown_views: ShownViews | None = None  # crops kept for batch-mode replays (detach)

    def __repr__(self) -> str:
        return f"GiantAgent(name={self.name!r}, chat={self.chat!r}, max_steps={self.max_steps})"

    def prefetch(self, item: AgentItem) -> None:
        """Start reading ``item``'s slide overview now, ahead of its runs (the batch runner calls this)."""
        self.overviews.prefetch(item.wsi_path)

    async def shown_region(self, slide: openslide.OpenSlide, box: list[int]) -> ImagePart | None:
        """Level-0 ``box`` encoded exactly as a crop step sends it (the viewer re-renders runs with this);
        None when the region cannot be shown."""
        parts = await self._crop(slide, list(box), Step(0, "crop"), random.Random(0), self.max_steps)
        return next((p for p in parts if isinstance(p, ImagePart)), None)

    async def crop_view(
        self, slide: openslide.OpenSlide, box: list[Any], path: str | None = None
    ) -> ShownView:
        """Level-0 ``box`` exactly as a crop step shows it (``InvalidRegion`` when it cannot be shown):
        the plug-in kit's crops, which the viewer re-renders with ``shown_region``."""
        return await self._show(slide, list(box), "region", path, self.image_read)

    async def aclose(self) -> None:
        await self.overviews.aclose()
        await self.chat.aclose()

    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        """The tools offered at every step: none for the JSON protocol or a single step (T = 1)."""
        if self.protocol != "tools" or self.max_steps == 1:
            return ()
        if self.random_regions:
            return (VIEW_RANDOM_REGION,)
        zoom = zoom_spec(self.prompts)
        return (zoom, note_spec(self.prompts)) if self.note_tool else (zoom,)

    def system_prompt(self, width: int, height: int) -> str:
        """The system prompt for a slide of ``width`` x ``height`` level-0 pixels."""
        p, size = self.prompts, self.image_size
        if self.protocol == "json":
            return JSON_SYSTEM_PROMPT.format(
                width=width, height=height, max_steps=self.max_steps,
                analysis_steps=self.max_steps - 1, image_size=size,
            )  # fmt: skip
        if self.max_steps == 1:
            return p.single_step.format(width=width, height=height, image_size=size)
        if self.random_regions:
            return RANDOM_REGION_PROMPT.format(
                width=width, height=height, max_steps=self.max_steps, analysis_steps=self.max_steps - 1,
                image_size=size,
            )  # fmt: skip
        keep = self.max_images_in_context
        limitation = p.context_limitation.format(images_kept=keep - 1) if keep is not None else ""
        guidance = reminder = ""
        if self.note_tool:
            guidance = p.note_guidance + (p.note_guidance_pruned if keep is not None else "")
            reminder = p.note_reminder
        template = p.multi_step_first_call if self.serve_calls == "first" else p.multi_step
        return template.format(
            width=width, height=height, max_steps=self.max_steps, analysis_steps=self.max_steps - 1,
            image_size=size, context_limitation=limitation, note_guidance=guidance, note_reminder=reminder,
        )  # fmt: skip

    async def answer(self, item: AgentItem, run_index: int) -> AgentAnswer:
        """Navigate ``item``'s slide and answer; failures come back as ``AgentAnswer.error``, never raised."""
        if not item.wsi_path:
            return _failed([], f"slide unavailable: item {item.benchmark_id} has no resolved slide path")
        try:
            slide = await asyncio.to_thread(open_slide, item.wsi_path)
        except SlideError as exc:
            return _failed([], f"slide unavailable: {exc}")
        steps: list[Step] = []
        rng = random.Random(f"{self.seed}|{item.benchmark_name}|{item.benchmark_id}|{run_index}")
        region_rng = np.random.default_rng(
            region_seed(self.seed, item.benchmark_name, item.benchmark_id, run_index)
        )
        coords = None
        try:
            if self.random_regions:
                coords = await asyncio.to_thread(tissue_coords, slide, item.benchmark_name)
            for attempt in range(1, self.max_attempts + 1):
                key = _cache_key(self.model, item, run_index, attempt)
                regions = None if coords is None else draw_queue(coords, slide, self.max_steps, region_rng)
                try:
                    async with asyncio.timeout(self.attempt_timeout_s):
                        done = await self._attempt(slide, item, attempt, steps, rng, key, regions)
                except TimeoutError:
                    limit = self.attempt_timeout_s
                    message = f"attempt {attempt} took longer than attempt_timeout_s = {limit:g} s"
                    failed = _failed(steps, message)
                    failed.error_kind, failed.attempts = TIMEOUT, attempt
                    return failed
                if done is not None:
                    done.attempts = attempt
                    return done
            message = (
                f"no answer within {self.max_steps} steps in {self.max_attempts} attempts "
                "(a tool call at the last step every time)"
            )
            return AgentAnswer("", steps, message, MAX_RETRIES_EXCEEDED, self.max_attempts)
        except (openslide.OpenSlideError, OSError, SlideError) as exc:
            return _failed(steps, f"slide unavailable: reading {item.wsi_path} failed: {exc}")
        except NoTissueRegion as exc:
            return _failed(steps, f"no random region to show on {item.wsi_path}: {exc}")
        finally:
            await asyncio.to_thread(slide.close)

    async def _attempt(
        self,
        slide: openslide.OpenSlide,
        item: AgentItem,
        attempt: int,
        steps: list[Step],
        rng: random.Random,
        cache_key: str,
        regions: RegionQueue | None = None,
    ) -> AgentAnswer | None:
        """One attempt from scratch: an answer (or a failed AgentAnswer), or None when step T was a crop.
        ``regions``: the attempt's random squares (the random-region ablation), served by its own tool."""
        first = await self.overviews.get(str(item.wsi_path))
        steps.append(_overview_step(len(steps), first, attempt))
        width, height = first.width, first.height
        question = self.prompts.first_turn(item.benchmark_name, item.prompt, item.question, item.options)
        if self.protocol == "tools":
            opening = Message.user(TextPart(question), first.part)
        else:
            w, h = first.image_size
            intro = (
                f"{question}\n\nThe slide is {width} x {height} level-0 pixels. The overview below shows "
                f"all of it in {w} x {h} pixels (1 pixel is about {width / w:.1f} level-0 pixels)."
            )
            opening = Message.user(TextPart(intro), first.part, TextPart(_turns_left(self.max_steps)))
        messages = [Message.system(self.system_prompt(width, height)), opening]
        notes: list[str] = []
        for call in range(1, self.max_steps + 1):
            index = len(steps)
            context = prune_images(messages, self.max_images_in_context, self.prune_tool_images)
            try:
                reply = await self.chat.complete(context, self.tools, cache_key)
            except ProviderError as exc:
                steps.append(Step(index, "error", error=str(exc), attempt=attempt))
                failed = _failed(steps, f"model call failed at step {index}: {exc}")
                failed.error_kind = exc.error_kind  # e.g. content_filtered: not re-run, not an answer
                return failed
            step = self._model_step(index, attempt, reply)
            steps.append(step)
            messages.append(reply.as_message())
            last = call == self.max_steps
            if self.protocol == "tools":
                if not reply.tool_calls:
                    return self._final(steps, step, reply.text)
                if last:
                    step.action, step.error = "no_answer", NO_ANSWER
                    return None
                left = self.max_steps - call - 1
                serve = _Serve(slide, steps, step, rng, left, notes, regions, str(item.wsi_path))
                messages += await self._serve_tools(serve, reply.tool_calls)
                continue
            left = self.max_steps - call
            action = parse_action(reply.text)
            if action is not None and action.kind == "answer":
                step.action, step.response_tagged = "answer", False
                return AgentAnswer(action.answer, steps, response_tagged=False)
            if action is None and last:
                step.action, step.error = "answer", RAW_FINAL
                return self._final(steps, step, reply.text)
            if last:
                step.action, step.error = "no_answer", NO_ANSWER
                return None
            messages.append(await self._json_turn(slide, action, step, rng, left, str(item.wsi_path)))
        raise AssertionError("unreachable: the last call returns")

    def _model_step(self, index: int, attempt: int, reply: ModelReply) -> Step:
        return reply_step(index, "error", reply, self.model, self.prices, attempt)

    def _final(self, steps: list[Step], step: Step, text: str) -> AgentAnswer:
        response, report, tagged = split_answer(text)
        step.action, step.report, step.response_tagged = "answer", report, tagged
        return AgentAnswer(response, steps, response_tagged=tagged)

    async def _serve_tools(self, serve: _Serve, calls: tuple[ToolCall, ...]) -> list[Message]:
        """A result for every tool call (the APIs require one). ``serve_calls="all"``: each is served in
        order, the calls after the first as steps of their own (no tokens); ``"first"``: the others are
        answered with ``extra_call_ignored``."""
        results = []
        for n, call in enumerate(calls):
            if n and self.serve_calls == "first":
                results.append(Message.tool_result(call.id, TextPart(self.prompts.extra_call_ignored)))
                continue
            step = serve.step
            if n:
                step = Step(len(serve.steps), "crop", attempt=serve.step.attempt)
                serve.steps.append(step)
            step.tool_call_id = call.id
            results.append(Message.tool_result(call.id, *await self._call(serve, call, step)))
        return results

    async def _call(self, serve: _Serve, call: ToolCall, step: Step) -> list[TextPart | ImagePart]:
        args, p = call.arguments, self.prompts
        if call.name == NOTE and self.note_tool and args is not None:
            observation = args.get("observation", "")
            observation = observation if isinstance(observation, str) else json.dumps(observation)
            serve.notes.append(observation)
            step.action, step.note = "note", observation
            return [TextPart(p.note_recorded.format(observation=observation))]
        if serve.regions is not None and call.name == VIEW_RANDOM_REGION.name:
            return await self._random_region(serve, step)
        if call.name != ZOOM or args is None:
            step.action = "crop"
            step.error = f"unusable tool call {call.name}({call.raw_arguments[:200]})"
            problem = (
                f"there is no tool {call.name!r}"
                if call.name not in (t.name for t in self.tools)
                else f"the arguments {call.raw_arguments[:200]!r} are not a JSON object"
            )
            error = f"{problem}; call slide_zoom(x0, y0, w, h) with integers"
            return [TextPart(p.tool_error.format(error=error))]
        requested = [args.get(k) for k in ("x0", "y0", "w", "h")]
        return await self._crop(
            serve.slide, requested, step, serve.rng, serve.calls_left, serve.notes, serve.path
        )

    async def _json_turn(
        self,
        slide: openslide.OpenSlide,
        action: Action | None,
        step: Step,
        rng: random.Random,
        left: int,
        path: str | None = None,
    ) -> Message:
        if action is None:
            step.error = "reply has no JSON crop or answer action"
            text = f"I could not find a JSON action in your reply. {_FORMAT_HINT} {_turns_left(left)}"
            return Message.user(TextPart(text))
        return Message.user(*await self._crop(slide, list(action.box or []), step, rng, left, path=path))

    async def _crop(
        self,
        slide: openslide.OpenSlide,
        requested: list[Any],
        step: Step,
        rng: random.Random,
        left: int,
        notes: list[str] | None = None,
        path: str | None = None,
    ) -> list[TextPart | ImagePart]:
        """Show the requested (or, for random crops, a random) region; an invalid one is explained.
        ``left``: tool protocol, the function calls left; JSON protocol, the turns left; ``path``: the
        slide's file, naming the crops kept for replays (none kept without it)."""
        step.action, step.requested_box = "crop", _ints(requested)
        box: list[Any] = requested
        if self.random_crops:
            box = list(_random_box(step.requested_box, *slide.dimensions, rng))
        try:
            view = await self._show(slide, box, "region", path, self.image_read)
        except InvalidRegion as exc:
            step.error = f"invalid region: {exc}"
            error = f"That region cannot be shown: {exc}"
            if self.protocol == "tools":
                return [TextPart(self.prompts.tool_error.format(error=error))]
            return [TextPart(f"{error}. {_turns_left(left)}")]
        view.record(step)
        x, y, w, h = view.box
        image = view.part
        if self.protocol == "tools":
            text = self._tool_result_text(requested, view, slide.dimensions, left, notes or [])
            return [TextPart(text), image]
        note = " (clipped to the slide's edges)" if view.clipped else ""
        text = (
            f"Region x0={x}, y0={y}, w={w}, h={h}{note}, level-0 pixels, shown at {view.size[0]} x "
            f"{view.size[1]} pixels. {_turns_left(left)}"
        )
        return [TextPart(text), image]

    def _tool_result_text(
        self, requested: list[Any], view: ShownView, size: tuple[int, int], left: int, notes: list[str]
    ) -> str:
        """The reminder (the region as asked for, or as shown for random crops; the slide's size; the
        function calls left), then the notes so far when the note tool is on."""
        p = self.prompts
        x0, y0, w, h = view.box if self.random_crops else requested
        width, height = size
        text = p.tool_result.format(x0=x0, y0=y0, w=w, h=h, width=width, height=height, calls_left=left)
        if self.random_crops:
            text += " A region chosen at random is shown instead of the one asked for."
        if self.note_tool and notes:
            text += p.notes_header.format(count=len(notes))
            text += "".join(p.note_line.format(index=i, observation=o) for i, o in enumerate(notes, 1))
        return text

    async def _random_region(self, serve: _Serve, step: Step) -> list[TextPart | ImagePart]:
        """The attempt's next random square, as a crop is shown, or a note that none is left."""
        assert serve.regions is not None
        step.action = "crop"
        box = serve.regions.next()
        if box is None:
            step.error = "no random regions left"
            return [TextPart(NO_REGIONS_LEFT)]
        view = await self._show(serve.slide, list(box), "random region", serve.path, "exact")
        view.record(step)
        x, y, w, h = view.box
        width, height = serve.slide.dimensions
        text = RANDOM_REGION_RESULT.format(
            x0=x, y0=y, w=w, h=h, width=width, height=height, calls_left=serve.calls_left,
            regions_left=serve.regions.left,
        )  # fmt: skip
        return [TextPart(text), view.part]

    async def _show(
        self, slide: openslide.OpenSlide, box: list[Any], label: str, path: str | None, image_read: str
    ) -> ShownView:
        """Level-0 ``box`` as a crop step sends it (``label`` names it to the model); from
        ``shown_views`` when a replay of this run made it before (see agents/shown_views.py)."""
        kept, key = self.shown_views, None
        if kept is not None and path:
            settings = {"size": self.image_size, "read": image_read, "encoding": self.crop_encoding}
            key = kept.key(path, box, label=label, **settings)
        if key is not None:
            found = await asyncio.to_thread(kept.get, key)
            if found is not None:
                return found
        view = await asyncio.to_thread(region, slide, box, self.image_size, image_read=image_read)
        x, y, w, h = view.box
        encoded = self.crop_encoding.part
        part = await asyncio.to_thread(encoded, view.image, f"{label} x0={x}, y0={y}, w={w}, h={h}")
        shown = ShownView(view.box, view.level, view.image.size, view.clipped, part)
        if key is not None:
            await asyncio.to_thread(kept.put, key, shown)
        return shown


@dataclass
class _Serve:
    """What serving the tool calls of one reply needs."""

    slide: openslide.OpenSlide
    steps: list[Step]
    step: Step  # the model call's step: the first call's outcome is recorded on it
    rng: random.Random
    calls_left: int  # T - step - 1, as the official reminder counts
    notes: list[str]
    regions: RegionQueue | None = None  # the random-region ablation: the attempt's squares
    path: str | None = None  # the slide's file (names the crops kept for replays)


def reply_step(
    index: int, action: str, reply: ModelReply, model: str, prices: PriceTable, attempt: int = 1
) -> Step:
    """The step of one model call: its reply's text, tokens, cost at ``prices`` for ``model``, latency."""
    u = reply.usage
    cost = prices.cost(model, u.input_tokens, u.output_tokens, u.cached_input_tokens, u.cache_write_tokens)
    return Step(
        index,
        action,
        text=reply.text,
        input_tokens=u.input_tokens,
        output_tokens=u.output_tokens,
        cost_usd=cost.usd,
        latency_s=reply.latency_s,
        attempt=attempt,
        cached_input_tokens=u.cached_input_tokens,
        cache_write_tokens=u.cache_write_tokens,
        reasoning_tokens=u.reasoning_tokens,
        reasoning=reply.reasoning,
        http_attempts=reply.attempts,
        provider_notes=list(reply.notes),
    )


def _turns_left(left: int) -> str:
    """The JSON protocol's budget line."""
    if left <= 1:
        return "This is your last turn: give your final answer now, without calling the tool."
    return f"Turns left, the final answer included: {left}."


def _overview_step(index: int, first: Overview, attempt: int) -> Step:
    return Step(
        index, "thumbnail", box=list(first.box), level=first.level, image_size=list(first.image_size),
        attempt=attempt, image_sha256=[first.part.sha256],
    )  # fmt: skip


def _cache_key(model: str, item: AgentItem, run_index: int, attempt: int) -> str:
    """``prompt_cache_key``: one per (model, item, run, attempt), whose calls share a growing prefix."""
    blob = f"{model}|{item.benchmark_name}|{item.benchmark_id}|{run_index}|{attempt}"
    return "giant-" + hashlib.sha256(blob.encode()).hexdigest()[:24]


def _random_box(requested: list[int] | None, width: int, height: int, rng: random.Random) -> tuple[int, ...]:
    """The requested size (clipped to the slide) at a uniformly random position; a random square when the
    request has no usable size (side between 1/16 and 1/2 of the slide's short side)."""
    if requested and requested[2] > 0 and requested[3] > 0:
        w, h = min(requested[2], width), min(requested[3], height)
    else:
        w = h = max(1, round(rng.uniform(1 / 16, 1 / 2) * min(width, height)))
    return rng.randint(0, width - w), rng.randint(0, height - h), w, h


def _ints(values: list[Any]) -> list[int] | None:
    """The requested box as ints for the trajectory, or None if it is not four numbers."""
    try:
        out = [round(float(v)) for v in values]
    except (TypeError, ValueError, OverflowError):
        return None
    return out if len(out) == 4 else None


def _tagged(text: str, tag: str) -> list[str]:
    """What ``re.findall(r"<tag>(.*?)</tag>", text, DOTALL | IGNORECASE)`` gives, in one linear pass
    (that regex is quadratic on a reply of many unclosed ``<tag>``: 80 KB took 2.3 s)."""
    found: list[str] = []
    start: int | None = None
    for m in _TAG.finditer(text):
        if m.group(2).lower() != tag:
            continue
        if m.group(1) and start is not None:
            found.append(text[start : m.start()])
            start = None
        elif not m.group(1) and start is None:
            start = m.end()
    return found


def _classify(obj: dict[str, Any]) -> Action | None:
    kind = str(obj.get("action", "")).strip().lower()
    box = obj.get("box") or obj.get("bbox")
    if kind == "crop" or (not kind and all(k in obj for k in "xywh")):
        if isinstance(box, list):
            return Action("crop", box=box)
        # missing coordinates give an empty box, which the crop step explains to the model
        return Action("crop", box=[obj[k] for k in "xywh" if k in obj])
    if kind == "answer" or "answer" in obj:
        value = obj.get("answer")
        return Action("answer", answer=value if isinstance(value, str) else json.dumps(value))
    if not kind:  # a bare object such as {"isup_grade": 3} is the answer itself
        return Action("answer", answer=json.dumps(obj))
    return None


def _failed(steps: list[Step], message: str) -> AgentAnswer:
    if not steps or steps[-1].error is None:
        attempt = steps[-1].attempt if steps else 1
        steps.append(Step(len(steps), "error", error=message, attempt=attempt))
    return AgentAnswer(text="", steps=steps, error=message)
