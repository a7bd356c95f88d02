"""What the scripted model received, decoded for assertions whatever the wire format."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from PIL import Image

from giant_assets.demo.scripted import chat, gemini, messages, responses
from giant_assets.demo.scripted.routes import route
from giant_assets.demo.scripted.turns import Turn


class Headers(dict):
    """Request headers looked up case-insensitively (SDKs send lower-case names)."""

    def __init__(self, items: Mapping[str, str] | Sequence[tuple[str, str]] = ()) -> None:
        super().__init__({k.lower(): v for k, v in dict(items).items()})

    def __getitem__(self, key: str) -> str:
        return super().__getitem__(key.lower())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and super().__contains__(key.lower())

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key.lower(), default)


@dataclass
class RecordedRequest:
    """What the server received, decoded for assertions."""

    path: str
    headers: dict[str, str]
    body: bytes
    received_at: float  # time.monotonic()
    query: dict[str, str] = field(default_factory=dict)  # the URL's query parameters

    @property
    def wire(self) -> str:
        """ "responses", "chat", "messages" or "gemini"."""
        return route(self.path)[0]

    @property
    def provider(self) -> str:
        """Whose route the request came to: openai, azure, anthropic, bedrock, vertex, gemini or
        vertex-gemini."""
        return route(self.path)[1]

    @property
    def route_params(self) -> dict[str, str]:
        """The route's path parameters (``deployment``, ``model``, ``project``, ``region``)."""
        return route(self.path)[2]

    @cached_property
    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    @property
    def tools(self) -> list[str]:
        """Names of the tools offered."""
        if self.wire == "gemini":
            return gemini.tool_names(self.json or {})
        tools = (self.json or {}).get("tools") or []
        return [t.get("name") or (t.get("function") or {}).get("name", "") for t in tools]

    @cached_property
    def turns(self) -> list[Turn]:
        """The conversation as turns, whichever wire format carried it (consecutive assistant items of
        one Responses reply form one turn)."""
        body = self.json if isinstance(self.json, dict) else {}
        parse = {"responses": responses.turns, "chat": chat.turns, "messages": messages.turns,
                 "gemini": gemini.turns}  # fmt: skip
        return parse.get(self.wire, chat.turns)(body)

    @property
    def text(self) -> str:
        return "\n".join(t for turn in self.turns for t in turn.texts)

    @property
    def question(self) -> str:
        """The first user turn's first text: the question as the agent asked it."""
        return next(t for t in self.turns if t.role == "user").texts[0]

    @property
    def images(self) -> list[Image.Image]:
        return [Image.open(io.BytesIO(b)) for turn in self.turns for b in turn.images]

    @property
    def assistant_turns(self) -> int:
        return sum(turn.role == "assistant" for turn in self.turns)

    @property
    def reasoning_enabled(self) -> bool:
        body = self.json or {}
        if self.wire == "gemini":
            return gemini.thinking(body)
        return bool(body.get("reasoning") or body.get("reasoning_effort") or body.get("thinking"))
