"""Provider-neutral conversation pieces: messages, parts, tools, tool calls and replies.

An agent builds a list of ``Message`` and each wire format (``openai_responses``, ``openai_chat``,
``anthropic``) translates it. What a provider needs back verbatim on the next call (OpenAI reasoning
items, Anthropic thinking blocks) travels in ``Message.replay``, opaque to the agent.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True)
class ImagePart:
    data_b64: str = field(repr=False)
    media_type: str = "image/jpeg"
    label: str = "image"  # what the image shows, for the note that replaces it when it leaves the context
    detail: str | None = None  # OpenAI's image ``detail`` ("low" | "high" | "auto"); None: no field sent

    @property
    def sha256(self) -> str:
        """Hex SHA-256 of the encoded image bytes sent (what ``Step.image_sha256`` records)."""
        return hashlib.sha256(base64.b64decode(self.data_b64)).hexdigest()


Part = TextPart | ImagePart


@dataclass(frozen=True)
class ToolSpec:
    """A function the model may call; ``parameters`` is a JSON schema object."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    """A call the model asked for; ``arguments`` is None when ``raw_arguments`` is not a JSON object."""

    id: str
    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str = ""


@dataclass(frozen=True)
class Message:
    """One turn. ``tool`` turns answer ``call_id``; assistant turns may carry ``tool_calls``/``replay``."""

    role: Role
    parts: tuple[Part, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    call_id: str = ""
    replay: tuple[dict[str, Any], ...] = field(default=(), repr=False)

    @classmethod
    def system(cls, text: str) -> Message:
        return cls("system", (TextPart(text),))

    @classmethod
    def user(cls, *parts: Part) -> Message:
        return cls("user", tuple(parts))

    @classmethod
    def assistant(
        cls, text: str, tool_calls: Sequence[ToolCall] = (), replay: Sequence[dict] = ()
    ) -> Message:
        return cls("assistant", (TextPart(text),) if text else (), tuple(tool_calls), replay=tuple(replay))

    @classmethod
    def tool_result(cls, call_id: str, *parts: Part) -> Message:
        return cls("tool", tuple(parts), call_id=call_id)

    @property
    def text(self) -> str:
        return "\n".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def images(self) -> list[ImagePart]:
        return [p for p in self.parts if isinstance(p, ImagePart)]


def token_count(value: Any, name: str) -> int:
    """A usage count as the server sent it, as an int: null/absent is 0 (local servers often omit
    usage); anything but a non-negative whole number raises ValueError naming the field."""
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(
            f"usage {name} is {str(value)[:40]!r}, not a token count: the server's reply is malformed"
        )
    return value


@dataclass(frozen=True)
class Usage:
    """Tokens of one call. ``input_tokens`` counts every input token, cached and cache-written included."""

    input_tokens: int = 0
    output_tokens: int = 0  # reasoning/thinking included
    cached_input_tokens: int = 0  # read from the provider's prompt cache
    cache_write_tokens: int = 0  # written to it (Anthropic bills these above the input rate)
    reasoning_tokens: int = 0

    def __post_init__(self) -> None:
        for name in ("input_tokens", "output_tokens", "cached_input_tokens", "cache_write_tokens",
                     "reasoning_tokens"):  # fmt: skip
            object.__setattr__(self, name, token_count(getattr(self, name), name))

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class ModelReply:
    """What one model call returned, after retries.

    An empty reply (a 200 whose list of outputs is empty: Chat ``choices``, Responses ``output``, Claude
    ``content``, Gemini ``candidates``, which its JSON leaves out when empty) is ``text == ""`` with no
    tool call on every wire: the model's answer with nothing in it, scored wrong (``no_answer``) like any
    answer without a label, never a failed run (``agent_error``, re-run on resume until the model says
    something). A body lacking the list altogether is malformed."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage()
    latency_s: float = 0.0  # wall time of the whole call, retries and waits included
    attempts: int = 1
    waited_s: float = 0.0  # time slept between attempts
    reasoning: str = ""  # reasoning summaries / thinking text, when the provider shows them
    replay: tuple[dict[str, Any], ...] = field(default=(), repr=False)  # send back in the assistant turn
    raw_status: int = 200
    notes: tuple[str, ...] = ()  # what the provider changed in the request to get it accepted

    @property
    def input_tokens(self) -> int:
        return self.usage.input_tokens

    @property
    def output_tokens(self) -> int:
        return self.usage.output_tokens

    def as_message(self) -> Message:
        """The assistant turn to append to the conversation."""
        return Message.assistant(self.text, self.tool_calls, self.replay)


class ChatModel(Protocol):
    """What an agent needs from a model: one multimodal call with optional tools, and closing."""

    name: str  # model id as the provider knows it
    provider: str  # "openai" | "anthropic"

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (), cache_key: str | None = None
    ) -> ModelReply: ...

    async def aclose(self) -> None: ...
