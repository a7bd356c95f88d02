"""A two-model plug-in agent (docs/plugins.md): one model proposes where to look, another answers.

The experiment's model (``kit.model``) sees the slide's overview and the question and proposes a region
as a JSON crop action; the region is cropped as GIANT crops it. The answering model
(``agent_options.answerer``, ``kit.chat_model``) then gets the question with the crops only, never the
overview, and its reply is the answer. ``agent_options.regions`` (1 to 8, default 1): proposals asked
for, one after the other, until the proposer answers instead of cropping. ``make_agent.expected_calls``
declares the calls of one run per model, which ``giant-experiments estimate`` prices at each model's price.

It imports nothing of the platform but ``giant_assets.kit``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from giant_assets.kit import AgentAnswer, AgentItem, InvalidRegion, Kit, Message, Step, TextPart, View

CROP_ACTION = re.compile(r"\{[^{}]*\"action\"\s*:\s*\"crop\"[^{}]*\}")
PROPOSE = (
    "A whole-slide image of {width} x {height} pixels (level 0) and this question about it:\n\n{question}\n\n"
    "Do not answer. Propose the one region that best shows the answer, in level-0 pixels, as JSON: "
    '{{"action": "crop", "x": <int>, "y": <int>, "w": <int>, "h": <int>}}.'
)
NEXT = 'Here is that region. Propose another one the same way, or reply {"action": "done"}.'


def _options(options: dict[str, Any]) -> tuple[str, int]:
    """(answerer, regions) from ``agent_options``, refused with the field's name when unusable."""
    answerer = options.get("answerer")
    if not isinstance(answerer, str) or not answerer.strip():
        raise ValueError("agent_options.answerer: the answering model's name is required (a text)")
    regions = options.get("regions", 1)
    if isinstance(regions, bool) or not isinstance(regions, int) or not 1 <= regions <= 8:
        raise ValueError(f"agent_options.regions: a whole number from 1 to 8, not {regions!r}")
    return answerer, regions


def _proposed_box(text: str) -> list[Any] | None:
    """The last JSON crop action's [x, y, w, h] in ``text``; None when there is none."""
    for found in reversed(CROP_ACTION.findall(text)):
        try:
            action = json.loads(found)
        except ValueError:
            continue
        return [action.get(k) for k in ("x", "y", "w", "h")]
    return None


class TwoModelAgent:
    def __init__(self, kit: Kit) -> None:
        answerer, self.regions = _options(kit.options)
        self.kit = kit
        self.proposer = kit.model
        self.answerer = kit.chat_model(answerer)
        self.name = "two-model"
        self.model = f"{self.proposer.name}+{self.answerer.name}"

    async def answer(self, item: AgentItem, run_index: int) -> AgentAnswer:
        steps: list[Step] = []
        crops: list[View] = []
        async with self.kit.slides.open(item) as slide:
            overview = await slide.overview()
            steps.append(overview.record(Step(len(steps), "thumbnail")))
            text = PROPOSE.format(width=slide.width, height=slide.height, question=item.prompt)
            talk = [Message.user(TextPart(text), overview.part)]
            for _ in range(self.regions):
                reply = await self.proposer.complete(talk)
                step = self.kit.model_step(len(steps), reply, "crop", model=self.proposer)
                steps.append(step)
                box = _proposed_box(reply.text)
                if box is None:
                    break
                try:
                    crop = await slide.crop(box)
                except InvalidRegion as exc:
                    step.error = f"invalid region: {exc}"
                    break
                crops.append(crop)
                crop.record(step)
                talk += [reply.as_message(), Message.user(TextPart(NEXT), crop.part)]
        if not crops:
            return AgentAnswer("", steps, error="the proposing model proposed no region that can be shown")
        question = Message.user(TextPart(item.prompt), *(crop.part for crop in crops))
        final = await self.answerer.complete([question])
        steps.append(self.kit.model_step(len(steps), final, "answer", model=self.answerer))
        return AgentAnswer(final.text, steps)

    async def aclose(self) -> None:
        """Nothing of its own to close: the kit closes both models."""


def make_agent(kit: Kit) -> TwoModelAgent:
    """The factory an experiment names: ``agent: two_model_agent:make_agent``."""
    return TwoModelAgent(kit)


def expected_calls(options: dict[str, Any], model: str) -> dict[str, Any]:
    """The model calls of one run, per model: 1 to ``regions`` proposals by the experiment's ``model``,
    then one answer by the answerer."""
    answerer, regions = _options(options)
    if answerer == model:
        return {model: [2, regions + 1]}
    return {model: [1, regions], answerer: 1}


make_agent.expected_calls = expected_calls  # type: ignore[attr-defined]
