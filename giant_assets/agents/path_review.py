"""The path review (the released ``run_benchmark_path_review.py``): GIANT's navigation, asked instead of
the item's question to examine the slide, name organ and diagnosis and report, as JSON, the five regions
that mattered most (level-0 box, why it zoomed, what it saw, diagnostic relevance).

Everything else is the GIANT agent's (agents/giant.py): system prompt, tools, step budget, reruns after
a step budget spent on a tool call. The request is ``PromptSet.review_request`` (the platform's own
words, or the official text from a ``giant-prompts import`` prompt file); the reply is parsed and
compared with the crops viewed downstream (eval/path_review.py, the ``path_review_*`` assets).
"""

from __future__ import annotations

from dataclasses import replace

from giant_assets.agents.giant import GiantAgent
from giant_assets.runs.agent_api import AgentAnswer, AgentItem


class PathReviewAgent(GiantAgent):
    """GIANT with the review request as the first user turn (the item's question is not sent)."""

    async def answer(self, item: AgentItem, run_index: int) -> AgentAnswer:
        request = replace(item, prompt=self.prompts.review_request, question=None, options=None)
        return await super().answer(request, run_index)
