"""JSON from untrusted text with planned limits, and JSON objects found in a model's raw answer text.

Limits (each refusal is a ``JsonLimitError`` with a message, never a traceback):

* ``MAX_JSON_DEPTH`` = 64 levels of nested arrays/objects (checked before parsing, so a 100k-deep
  document costs one linear scan, not a RecursionError);
* integers of more than 4300 digits (Python's own limit) are refused by the parser;
* ``MAX_ANSWER_CHARS`` = 1,000,000 characters of answer text searched for a JSON object, by the one
  bounded scanner for model text (``core.jsonscan``: at most ``DECODE_BUDGET`` = 8,000,000 characters
  decoded in all, an object nested past the recursion limit skipped whole).
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

from giant_assets.core.jsonscan import json_objects

MAX_JSON_DEPTH = 64
MAX_ANSWER_CHARS = 1_000_000
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_FENCE = re.compile(r"```[ \t]*(?:json|JSON|jsonc)?[ \t]*\r?\n(.*?)```", re.DOTALL)


class JsonLimitError(ValueError):
    """Text that is not JSON, or JSON beyond a documented limit; the message says which."""


class NotJsonError(JsonLimitError):
    """Text that is not UTF-8 JSON at all."""


def json_depth(text: str) -> int:
    """Deepest nesting of arrays/objects in JSON text (brackets inside strings are ignored): the highest
    running sum of +1 per opening and -1 per closing bracket, summed in C (a 30 MB payload in ~0.1 s)."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return text.count("[") + text.count("{")  # an upper bound small enough to accept
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(0, max(accumulate(map(_DEPTH_STEP.__getitem__, brackets)), default=0))


def loads(text: str | bytes, what: str = "input") -> Any:
    """``json.loads`` within the limits; every problem is a JsonLimitError naming ``what``."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NotJsonError(
                f"{what}: not UTF-8 text (byte 0x{text[exc.start]:02x} at offset {exc.start})"
            ) from None
    depth = json_depth(text)
    if depth > MAX_JSON_DEPTH:
        raise JsonLimitError(f"{what}: JSON nested {depth} levels deep; the limit is {MAX_JSON_DEPTH}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotJsonError(
            f"{what}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except (ValueError, RecursionError) as exc:  # e.g. an integer of more than 4300 digits
        raise JsonLimitError(f"{what}: JSON refused: {exc}") from None


def _as_object(text: str) -> dict | None:
    try:
        value = loads(text)
    except JsonLimitError:
        return None
    return value if isinstance(value, dict) else None


def extract_json_object(text: str, what: str = "answer") -> dict:
    """The JSON object in a model's raw answer text.

    In order: the whole text if it is a JSON object; else the first fenced code block (```json or
    ```) holding an object; else the last top-level ``{...}`` in the prose that parses as an object
    (a final answer usually comes last) and nests at most MAX_JSON_DEPTH levels, found by
    ``core.jsonscan.json_objects`` over the whole text. Raises JsonLimitError when there is none.
    """
    if len(text) > MAX_ANSWER_CHARS:
        raise JsonLimitError(f"{what}: {len(text):,} characters of text; the limit is {MAX_ANSWER_CHARS:,}")
    whole = _as_object(text.strip())
    if whole is not None:
        return whole
    for block in _FENCE.findall(text):
        found = _as_object(block.strip())
        if found is not None:
            return found
    for found in reversed(json_objects(text, window=MAX_ANSWER_CHARS)):
        if json_depth(json.dumps(found)) <= MAX_JSON_DEPTH:
            return found
    raise JsonLimitError(f"{what}: no JSON object found in the text {text[:80]!r}")
