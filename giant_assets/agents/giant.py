"""GIANT: a multimodal model navigates a whole-slide image, as the paper's released code runs it.

One run of an item:

1. The model gets the question and an overview of the whole slide (long side ``image_size``, four
   labelled level-0 guide lines per axis drawn on it), with the ``slide_zoom(x0, y0, w, h)`` tool.
2. Each model call is one step; ``max_steps`` T counts them all, the final answer included, so at
   most T-1 regions are shown. The tool stays offered at every step; a reply without a tool call is
   the final answer, ``<report>...</report><response>...</response>`` (the response goes to answer
   extraction; without tags the whole text does, and ``response_tagged`` says so).
3. A tool call at step T means no answer: the run starts again from scratch, up to ``max_attempts``
   attempts in all; then the run fails with error kind ``max_retries_exceeded``. Every attempt is in
   the trajectory (``Step.attempt``) and in the cost.

``protocol="json"`` keeps the free-JSON actions for models without tool calling; ``random_crops``
is the paper's random-patch ablation (the same loop, crop locations drawn at random).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import string
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import openslide

from giant_assets.agents.base import AgentAnswer, AgentItem, Step
from giant_assets.agents.overviews import Overview, OverviewCache
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
from giant_assets.slides.access import InvalidRegion, SlideError, encode_image, media_type, open_slide
from giant_assets.slides.views import SlideView, region

MAX_RETRIES_EXCEEDED = "max_retries_exceeded"
PLACEHOLDERS = ("width", "height", "max_steps", "analysis_steps", "image_size")

SLIDE_ZOOM = ToolSpec(
    name="slide_zoom",
    description=(
        "Show a rectangular region of the slide at higher magnification. Coordinates are integers in "
        "level-0 pixels (the numbers on the guide lines): x0, y0 is the top-left corner (x grows to the "
        "right, y downwards), w and h the width and height."
    ),
    parameters={
        "type": "object",
        "properties": {
            k: {"type": "integer", "description": d}
            for k, d in (
                ("x0", "left edge, level-0 pixels"),
                ("y0", "top edge, level-0 pixels"),
                ("w", "width, level-0 pixels"),
                ("h", "height, level-0 pixels"),
            )
        },  # fmt: skip
        "required": ["x0", "y0", "w", "h"],
        "additionalProperties": False,
    },
)

SYSTEM_PROMPT = """\
You are a pathologist examining a whole-slide image of {width} x {height} pixels at full resolution \
(level 0) to answer a question about it. You first see an overview of the whole slide. Green guide \
lines, four per axis, are labelled with level-0 coordinates on every image you get.

To look closer, call the slide_zoom tool with a region in level-0 pixels; you get that region back as \
an image of at most {image_size} pixels on its long side, so smaller regions show finer detail. You \
have {max_steps} turns in all, including your final answer, so at most {analysis_steps} zooms. Use \
them to check the features that decide the answer.

When you are ready, reply without calling the tool: first your findings in <report>...</report>, then \
the answer alone, exactly in the format the question asks for, in <response>...</response>."""

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
_RESPONSE = re.compile(r"<response>(.*?)</response>", re.DOTALL | re.IGNORECASE)
_REPORT = re.compile(r"<report>(.*?)</report>", re.DOTALL | re.IGNORECASE)
_FORMAT_HINT = (
    'Reply with one JSON object: {"action": "crop", "x": .., "y": .., "w": .., "h": ..} in level-0 pixels, '
    'or {"action": "answer", "answer": ..}.'
)


def load_prompt_template(path: str | Path) -> str:
    """A user's system-prompt template; placeholders ``{width}``, ``{height}`` (level-0 slide size),
    ``{max_steps}`` (T), ``{analysis_steps}`` (T-1 zooms), ``{image_size}``; ``{{``/``}}`` are braces.

    Raises ValueError naming the file and the placeholder for anything else.
    """
    path = Path(path).expanduser()
    try:
        text = path.read_text()
    except OSError as exc:
        raise ValueError(f"prompt_path {path}: cannot be read ({exc.strerror or exc})") from exc
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(text) if f is not None]
    except ValueError as exc:
        raise ValueError(
            f"prompt_path {path}: not a valid template ({exc}); write literal braces as {{{{ }}}}"
        ) from exc
    for name in fields:
        if name not in PLACEHOLDERS:
            raise ValueError(
                f"prompt_path {path}: unknown placeholder {{{name}}}; "
                f"use {', '.join('{' + p + '}' for p in PLACEHOLDERS)} (literal braces as {{{{ }}}})"
            )
    return text


@dataclass(frozen=True)
class Action:
    """A free-JSON protocol action."""

    kind: str  # "crop" | "answer"
    box: list[Any] | None = None  # as the model wrote it, validated only when cropping
    answer: str = ""


def parse_action(text: str) -> Action | None:
    """The last JSON object in ``text`` that reads as a crop or an answer; None if there is none."""
    for obj in reversed(_json_objects(text)):
        action = _classify(obj)
        if action is not None:
            return action
    return None


def split_answer(text: str) -> tuple[str, str, bool]:
    """(response, report, tagged): the last ``<response>`` text, or the whole text when it has none."""
    responses = _RESPONSE.findall(text)
    reports = _REPORT.findall(text)
    report = reports[-1].strip() if reports else ""
    if responses:
        return responses[-1].strip(), report, True
    return text.strip(), report, False


def limit_images(messages: list[Message], keep: int | None) -> list[Message]:
    """The conversation with all but the newest ``keep`` images replaced by a one-line note."""
    if keep is None:
        return messages
    seen = 0
    out: list[Message] = []
    for m in reversed(messages):
        parts = []
        for p in reversed(m.parts):
            if isinstance(p, ImagePart):
                seen += 1
                if seen > keep:
                    p = TextPart(f"[{p.label}: image removed from the context]")
            parts.append(p)
        out.append(replace(m, parts=tuple(reversed(parts))))
    return list(reversed(out))


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
        system_template: str | None = None,
        prices: PriceTable | None = None,
        image_format: str = "JPEG",
        random_crops: bool = False,
        seed: int = 0,
        name: str = "giant",
    ) -> None:
        if max_steps < 1 or max_attempts < 1:
            raise ValueError(f"max_steps and max_attempts must be >= 1, got {max_steps}, {max_attempts}")
        if protocol not in ("tools", "json"):
            raise ValueError(f"protocol must be 'tools' or 'json', got {protocol!r}")
        self.chat = model
        self.model = model.name
        self.name = name
        self.max_steps = max_steps
        self.max_attempts = max_attempts
        self.image_size = image_size
        self.protocol = protocol
        self.max_images_in_context = max_images_in_context
        default = SYSTEM_PROMPT if protocol == "tools" else JSON_SYSTEM_PROMPT
        self.system_template = system_template or default
        self.prices = prices or load_price_table()
        self.image_format = image_format
        self.random_crops = random_crops
        self.seed = seed
        self.overviews = OverviewCache(image_size, image_format)

    def __repr__(self) -> str:
        return f"GiantAgent(name={self.name!r}, chat={self.chat!r}, max_steps={self.max_steps})"

    def prefetch(self, item: AgentItem) -> None:
        """Start reading ``item``'s slide overview now, ahead of its runs (the batch runner calls this)."""
        self.overviews.prefetch(item.wsi_path)

    async def aclose(self) -> None:
        await self.overviews.aclose()
        await self.chat.aclose()

    def system_prompt(self, width: int, height: int) -> str:
        return self.system_template.format(
            width=width,
            height=height,
            max_steps=self.max_steps,
            analysis_steps=self.max_steps - 1,
            image_size=self.image_size,
        )

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
        try:
            for attempt in range(1, self.max_attempts + 1):
                key = _cache_key(self.model, item, run_index, attempt)
                done = await self._attempt(slide, item, attempt, steps, rng, key)
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
    ) -> AgentAnswer | None:
        """One attempt from scratch: an answer (or a failed AgentAnswer), or None when step T was a crop."""
        first = await self.overviews.get(str(item.wsi_path))
        steps.append(_overview_step(len(steps), first, attempt))
        width, height = first.width, first.height
        w, h = first.image_size
        intro = (
            f"{item.prompt}\n\nThe slide is {width} x {height} level-0 pixels. The overview below shows all "
            f"of it in {w} x {h} pixels (1 pixel is about {width / w:.1f} level-0 pixels)."
        )
        messages = [
            Message.system(self.system_prompt(width, height)),
            Message.user(TextPart(intro), first.part, TextPart(self._turns_left(self.max_steps))),
        ]
        tools = (SLIDE_ZOOM,) if self.protocol == "tools" else ()
        for call in range(1, self.max_steps + 1):
            index = len(steps)
            context = limit_images(messages, self.max_images_in_context)
            try:
                reply = await self.chat.complete(context, tools, cache_key)
            except ProviderError as exc:
                steps.append(Step(index, "error", error=str(exc), attempt=attempt))
                return _failed(steps, f"model call failed at step {index}: {exc}")
            step = self._model_step(index, attempt, reply)
            steps.append(step)
            messages.append(reply.as_message())
            last = call == self.max_steps
            left = self.max_steps - call
            if self.protocol == "tools":
                if not reply.tool_calls:
                    return self._final(steps, step, reply.text)
                if last:
                    step.action, step.error = "no_answer", NO_ANSWER
                    return None
                messages += await self._serve_tools(slide, reply.tool_calls, step, rng, left)
                continue
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
            messages.append(await self._json_turn(slide, action, step, rng, left))
        raise AssertionError("unreachable: the last call returns")

    def _model_step(self, index: int, attempt: int, reply: ModelReply) -> Step:
        u = reply.usage
        cost = self.prices.cost(
            self.model, u.input_tokens, u.output_tokens, u.cached_input_tokens, u.cache_write_tokens
        )
        return Step(
            index,
            "error",
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
        )

    def _final(self, steps: list[Step], step: Step, text: str) -> AgentAnswer:
        response, report, tagged = split_answer(text)
        step.action, step.report, step.response_tagged = "answer", report, tagged
        return AgentAnswer(response, steps, response_tagged=tagged)

    async def _serve_tools(
        self,
        slide: openslide.OpenSlide,
        calls: tuple[ToolCall, ...],
        step: Step,
        rng: random.Random,
        left: int,
    ) -> list[Message]:
        """A result for every tool call (the APIs require one): the first is served, the rest declined."""
        first, *rest = calls
        step.tool_call_id = first.id
        results = [Message.tool_result(first.id, *await self._zoom(slide, first, step, rng, left))]
        for extra in rest:
            note = "Only one slide_zoom call is served per turn; this one was ignored."
            results.append(Message.tool_result(extra.id, TextPart(note)))
        return results

    async def _zoom(
        self, slide: openslide.OpenSlide, call: ToolCall, step: Step, rng: random.Random, left: int
    ) -> list[TextPart | ImagePart]:
        args = call.arguments
        if call.name != SLIDE_ZOOM.name or args is None:
            step.error = f"unusable tool call {call.name}({call.raw_arguments[:200]})"
            return [TextPart(f"Call slide_zoom with integer x0, y0, w, h. {self._turns_left(left)}")]
        return await self._crop(slide, [args.get(k) for k in ("x0", "y0", "w", "h")], step, rng, left)

    async def _json_turn(
        self, slide: openslide.OpenSlide, action: Action | None, step: Step, rng: random.Random, left: int
    ) -> Message:
        if action is None:
            step.error = "reply has no JSON crop or answer action"
            text = f"I could not find a JSON action in your reply. {_FORMAT_HINT} {self._turns_left(left)}"
            return Message.user(TextPart(text))
        return Message.user(*await self._crop(slide, list(action.box or []), step, rng, left))

    async def _crop(
        self, slide: openslide.OpenSlide, requested: list[Any], step: Step, rng: random.Random, left: int
    ) -> list[TextPart | ImagePart]:
        """Show the requested (or, for random crops, a random) region; an invalid one is explained."""
        step.action, step.requested_box = "crop", _ints(requested)
        box: list[Any] = requested
        if self.random_crops:
            box = list(_random_box(step.requested_box, *slide.dimensions, rng))
        try:
            view = await asyncio.to_thread(region, slide, box, self.image_size)
        except InvalidRegion as exc:
            step.error = f"invalid region: {exc}"
            return [TextPart(f"That region cannot be shown: {exc}. {self._turns_left(left)}")]
        step.box, step.level, step.image_size = list(view.box), view.level, list(view.image.size)
        x, y, w, h = view.box
        note = " (clipped to the slide's edges)" if view.clipped else ""
        chosen = (
            " A region chosen at random is shown instead of the one asked for." if self.random_crops else ""
        )
        text = (
            f"Region x0={x}, y0={y}, w={w}, h={h}{note}, level-0 pixels, shown at {view.image.size[0]} x "
            f"{view.image.size[1]} pixels.{chosen} {self._turns_left(left)}"
        )
        return [TextPart(text), await self._image_part(view, f"region x0={x}, y0={y}, w={w}, h={h}")]

    def _turns_left(self, left: int) -> str:
        if left <= 1:
            return "This is your last turn: give your final answer now, without calling the tool."
        return f"Turns left, the final answer included: {left}."

    async def _image_part(self, view: SlideView, label: str) -> ImagePart:
        data = await asyncio.to_thread(encode_image, view.image, self.image_format)
        return ImagePart(data, media_type(self.image_format), label)


def _overview_step(index: int, first: Overview, attempt: int) -> Step:
    return Step(
        index, "thumbnail", box=list(first.box), level=first.level, image_size=list(first.image_size),
        attempt=attempt,
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


def _json_objects(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object embedded in ``text`` (prose and code fences around them are fine)."""
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    i = text.find("{")
    while i != -1:
        try:
            obj, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            i = text.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            found.append(obj)
        i = text.find("{", end)
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
