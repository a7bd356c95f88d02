"""A plug-in agent outside the platform's package (the tests add this folder to the Python path): it
imports only ``giant_assets.kit``. One run: the overview and the question to the experiment's model,
which proposes a region (a JSON crop action); the crop of that region; the model's answer.

Options (``agent_options``): ``raise_on``: benchmark ids whose run raises ``RuntimeError``;
``exit_on``: ids whose run calls ``sys.exit``; ``return_none_on``: ids whose ``answer`` returns None.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from giant_assets.kit import AgentAnswer, AgentItem, InvalidRegion, Kit, Message, Step, TextPart

_CROP = re.compile(r"\{[^{}]*\"action\"\s*:\s*\"crop\"[^{}]*\}")


class LabAgent:
    def __init__(self, kit: Kit) -> None:
        self.kit = kit
        self.name = "lab"
        self.model = kit.model.name
        self.options: dict[str, Any] = kit.options

    async def answer(self, item: AgentItem, run_index: int) -> AgentAnswer | None:
        if item.benchmark_id in self.options.get("raise_on", []):
            raise RuntimeError(f"lab agent refuses item {item.benchmark_id}")
        if item.benchmark_id in self.options.get("exit_on", []):
            sys.exit(3)
        if item.benchmark_id in self.options.get("return_none_on", []):
            return None
        steps: list[Step] = []
        async with self.kit.slides.open(item) as slide:
            overview = await slide.overview()
            steps.append(overview.record(Step(0, "thumbnail")))
            ask = Message.user(
                TextPart(f"A slide of {slide.width} x {slide.height} pixels. {item.prompt}"), overview.part
            )
            proposal = await self.kit.model.complete([ask])
            step = self.kit.model_step(1, proposal, "crop")
            steps.append(step)
            found = _CROP.search(proposal.text)
            box = [json.loads(found.group())[k] for k in "xywh"] if found else [0, 0, 1, 1]
            try:
                crop = await slide.crop(box)
            except InvalidRegion as exc:
                step.error = f"invalid region: {exc}"
                return AgentAnswer("", steps, error=step.error)
            crop.record(step)
            shown = Message.user(TextPart("The region you asked for."), crop.part)
            final = await self.kit.model.complete([ask, proposal.as_message(), shown])
            steps.append(self.kit.model_step(2, final, "answer"))
        return AgentAnswer(final.text, steps)

    async def aclose(self) -> None:
        """Nothing of its own to close: the kit closes the model."""


def make_agent(kit: Kit) -> LabAgent:
    return LabAgent(kit)


def broken_factory(kit: Kit) -> LabAgent:
    raise ValueError("the lab factory is broken on purpose")


def not_an_agent(kit: Kit) -> str:
    return "not an agent"
