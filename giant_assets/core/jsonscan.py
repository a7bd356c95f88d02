"""Every JSON object embedded in a model's free text, found in bounded time whatever the text.

A plain scan (``raw_decode`` at every "{") is quadratic on a degenerate reply of a million braces
(``JSONDecodeError`` counts the lines before its position) and recurses past the limit on objects
nested 100,000 deep; this one reads at most the last ``MAX_PARSED_CHARS`` and ``DECODE_BUDGET``
characters in all, and skips a too-deep object whole. Used wherever model text is searched for JSON
(the GIANT agent's free-JSON actions, tool calls a local server writes in its text, answer extraction,
which also reads single-quoted Python dicts with ``python_literals``, and the judges' raw answer text,
which is read whole up to its own limit with ``window``).

``scan_objects`` also tells where each object lies and which objects the text's end cut short (a reply
stopped at its token limit), so a reader can tell a truncated final answer from none.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from dataclasses import dataclass, field
from typing import Any

MAX_PARSED_CHARS = 65_536  # a reply's JSON is looked for in its last 64 KiB only
DECODE_BUDGET = 8_000_000  # characters the scan may read in all (failed attempts included)
_WINDOW = 4096  # a JSON value is first decoded from this many characters
_DECODER = json.JSONDecoder()
_OBJECT_START = re.compile(r'\{[ \t\n\r]*["}]')
_LITERAL_START = re.compile(r"""\{[ \t\n\r]*["'}]""")
_SINGLE_QUOTED = re.compile(r"\{[ \t\n\r]*'")  # a Python-style dict's start
MAX_LITERAL_CHARS = 4096  # a Python-literal dict is read only when its braces span at most this
# A decode error this close to where the decoder's text ends, with only token characters after it, may be
# a token that end cut (``-Infinity``, a ``\uXXXX`` pair, ``1.5e+``: at most 12 characters).
_EDGE = 16
_TOKEN_CHARS = re.compile(r"[\w.+\-\\]*")


@dataclass(frozen=True)
class Found:
    """A JSON object found: where it starts and ends in the text scanned, and its value."""

    start: int
    end: int
    value: dict[str, Any]


@dataclass
class Scan:
    """The objects of a text in text order, and the starts of objects its end cut short (JSON, or with
    ``python_literals`` a single-quoted dict whose "{" no later "}" matches)."""

    objects: list[Found] = field(default_factory=list)
    cut_off: list[int] = field(default_factory=list)


def json_objects(
    text: str, *, python_literals: bool = False, window: int = MAX_PARSED_CHARS
) -> list[dict[str, Any]]:
    """Every top-level JSON object embedded in the last ``window`` characters of ``text`` (prose and code
    fences around them are fine), in text order. Bounded: an object nested past the recursion limit is
    skipped whole, and the scan stops after reading DECODE_BUDGET characters (a degenerate reply of
    unclosed braces). ``python_literals``: where JSON fails, a single-quoted Python dict
    (``{'answer': 3}``) of at most MAX_LITERAL_CHARS between matching braces is read too."""
    scan = scan_objects(text, python_literals=python_literals, window=window)
    return [found.value for found in scan.objects]


def scan_objects(text: str, *, python_literals: bool = False, window: int = MAX_PARSED_CHARS) -> Scan:
    """``json_objects`` with positions (in ``text``) and the starts of JSON objects cut short by the end
    of ``text`` (``{"answer": 3, "reasoning": "...`` at a reply's token limit)."""
    offset = max(0, len(text) - window)
    text = text[offset:]
    start = _LITERAL_START if python_literals else _OBJECT_START
    scan = Scan()
    closing: dict[int, int] | None = None
    budget = DECODE_BUDGET
    i = _next_object(text, 0, start)
    while i != -1 and budget > 0:
        try:
            obj, end, cost = _decode_at(text, i)
        except RecursionError:
            closing = _closing_braces(text) if closing is None else closing
            end = closing.get(i, len(text) - 1) + 1  # past the too-deep object, inner objects included
            budget -= len(text) - i
            i = _next_object(text, end, start)
            continue
        budget -= cost
        if obj is _CUT_OFF:
            scan.cut_off.append(offset + i)
            obj = None
        if obj is None and python_literals:
            closing = _closing_braces(text) if closing is None else closing
            close = closing.get(i)
            if close is None and _SINGLE_QUOTED.match(text, i):
                scan.cut_off.append(offset + i)  # a Python-style dict never closed: the text ends in it
            if close is not None and close - i < MAX_LITERAL_CHARS:
                budget -= close + 1 - i
                obj = _literal(text[i : close + 1])
                end = close + 1 if obj is not None else end
        if isinstance(obj, dict):
            scan.objects.append(Found(offset + i, offset + end, obj))
        i = _next_object(text, end if obj is not None else i + 1, start)
    return scan


def _next_object(text: str, pos: int, start: re.Pattern[str] = _OBJECT_START) -> int:
    """Where the next object may start (a "{" then a key or "}"), or -1."""
    found = start.search(text, pos)
    return found.start() if found else -1


def _literal(source: str) -> Any:
    """The Python literal ``source`` spells, or None when it is not one (or nests too deep)."""
    try:
        with warnings.catch_warnings():  # e.g. "invalid decimal literal" on '{1e5x: 2}'
            warnings.simplefilter("ignore", SyntaxWarning)
            return ast.literal_eval(source)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


_CUT_OFF = object()  # _decode_at's value for an object the end of the text cut short


def _decode_at(text: str, i: int) -> tuple[Any, int, int]:
    """(object, None or _CUT_OFF; end; characters read) of the JSON value starting at ``i``.

    Decoded from a slice of _WINDOW characters first, so a failure costs what was read, not ``i``
    (``JSONDecodeError`` counts the lines before its position); a value the window may have cut short
    (the decoder ran out of text: see ``_ran_out``) is decoded again from the whole rest of the text, and
    one that runs out there too is _CUT_OFF. A value Python refuses (an integer of more than 4300
    digits) is no object, like any other that does not decode.
    """
    chunk = text[i : i + _WINDOW]
    for attempt in (1, 2):
        try:
            obj, n = _DECODER.raw_decode(chunk)
            return obj, i + n, n
        except json.JSONDecodeError as exc:
            ran_out = _ran_out(chunk, exc)
            cost = max(1, exc.pos) + (len(chunk) if attempt == 2 else 0)
            if ran_out and i + len(chunk) >= len(text):  # the text itself ends inside the value
                return _CUT_OFF, i + 1, cost
            if attempt == 2 or not ran_out:
                return None, i + 1, cost
            chunk = text[i:]
        except ValueError:  # an integer of more than 4300 digits (Python's int limit): not an object here
            return None, i + 1, len(chunk)
    raise AssertionError("unreachable")


def _ran_out(chunk: str, exc: json.JSONDecodeError) -> bool:
    """True when the decoder failed for want of more text: a string never closed, or an error within
    _EDGE characters of the end with only token characters after it (``{"a": tr``, ``{"a": 1.5e+``,
    ``{"a": 1``), wherever the value's last token stands."""
    if exc.msg.startswith("Unterminated"):
        return True
    rest = chunk[exc.pos :]
    return len(rest) < _EDGE and _TOKEN_CHARS.fullmatch(rest) is not None


def _closing_braces(text: str) -> dict[int, int]:
    """Position of each "{" -> its matching "}" (one stack pass; quotes are not special)."""
    closing: dict[int, int] = {}
    stack: list[int] = []
    for i, char in enumerate(text):
        if char == "{":
            stack.append(i)
        elif char == "}" and stack:
            closing[stack.pop()] = i
    return closing
