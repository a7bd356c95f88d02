"""A conversation turn as any wire format carries it, and the decoding the three share."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Turn:
    """One turn in any wire format. ``tool_calls``: (name, arguments) an assistant turn asked for;
    a ``tool`` turn is a tool result (its text and images)."""

    role: str
    texts: tuple[str, ...]
    images: tuple[bytes, ...]  # decoded image file bytes
    tool_calls: tuple[tuple[str, Any], ...] = ()
    replayed: tuple[str, ...] = ()  # types of provider items sent back (reasoning, thinking)


def b64_url(url: str) -> bytes:
    return base64.b64decode(url.split(",", 1)[1])


def loads(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw
