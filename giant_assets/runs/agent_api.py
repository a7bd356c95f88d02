"""The one small interface every agent implements, and the trajectory it returns."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class AgentItem:
    """A resolved benchmark item as an agent sees it."""

    benchmark_name: str
    benchmark_id: str
    prompt: str  # the question with {options} already substituted
    options: list[str] | None
    wsi_path: str | None
    width: int | None = None  # level-0 slide size, when the slide was opened
    height: int | None = None
    item_fingerprint: str | None = None  # the question about the slide (multipathqa/fingerprint.py)
    question: str | None = None  # the CSV's prompt before rendering (PromptSet.first_turn's {question})


@dataclass
class Step:
    """One step of a trajectory: what the agent asked to see and what came back."""

    index: int  # position in the whole trajectory (all attempts)
    action: str  # "thumbnail" | "crop" | "note" | "answer" | "error" | "no_answer" (tool call at step T)
    box: list[int] | None = None  # level-0 region shown [x, y, w, h] (after clipping)
    level: int | None = None  # pyramid level read
    image_size: list[int] | None = None  # [w, h] of the image sent to the model
    text: str = ""  # model text for this step
    input_tokens: int = 0  # all input tokens, cached ones included
    output_tokens: int = 0  # reasoning included
    cost_usd: float = 0.0
    latency_s: float = 0.0
    error: str | None = None
    attempt: int = 1  # 1-based attempt (a run that hits max_steps without answering starts again)
    requested_box: list[int] | None = None  # the box as the model asked for it (random_patch: ignored)
    cached_input_tokens: int = 0  # input tokens read from the provider's prompt cache
    cache_write_tokens: int = 0  # input tokens written to it (Anthropic)
    reasoning_tokens: int = 0
    reasoning: str = ""  # reasoning summary / thinking text, when the provider shows it
    report: str = ""  # the final answer's <report> text
    response_tagged: bool | None = None  # answer steps: the reply had <response> tags
    tool_call_id: str | None = None
    http_attempts: int = 0  # HTTP attempts behind this model call (retries included)
    note: str = ""  # note steps: the observation the model recorded with the note tool
    image_sha256: list[str] = field(default_factory=list)  # SHA-256 of each image this step sent (encoded)
    provider_notes: list[str] = field(default_factory=list)  # what the provider changed to send the call


@dataclass
class AgentAnswer:
    """The final answer text plus the full trajectory and its accounting."""

    text: str
    steps: list[Step] = field(default_factory=list)
    error: str | None = None
    error_kind: str | None = None  # e.g. "max_retries_exceeded", "slide_unavailable"; None: agent_error
    attempts: int = 1
    response_tagged: bool | None = None  # the final reply carried <response> tags (None: not applicable)

    @property
    def input_tokens(self) -> int:
        return sum(s.input_tokens for s in self.steps)

    @property
    def output_tokens(self) -> int:
        return sum(s.output_tokens for s in self.steps)

    @property
    def cached_input_tokens(self) -> int:
        return sum(s.cached_input_tokens for s in self.steps)

    @property
    def cost_usd(self) -> float:
        return float(sum(s.cost_usd for s in self.steps))

    def steps_as_dicts(self) -> list[dict[str, Any]]:
        return [asdict(s) for s in self.steps]


class Agent(Protocol):
    """Answers one item; ``run_index`` distinguishes repeated runs (for seeding and voting).

    An agent may also define ``prefetch(item) -> None``: start, without waiting, the slide reads its
    next ``answer`` for ``item`` will need; the batch runner calls it for the runs about to start.
    """

    name: str
    model: str

    async def answer(self, item: AgentItem, run_index: int) -> AgentAnswer: ...

    async def aclose(self) -> None: ...
