"""Every JSON object embedded in a model's free text, found in bounded time whatever the text.

A plain scan (``raw_decode`` at every "{") is quadratic on a degenerate reply of a million braces
(``JSONDecodeError`` counts the lines before its position) and recurses past the limit on objects
nested 100,000 deep; this one reads at most the last ``MAX_PARSED_CHARS`` and ``DECODE_BUDGET``
characters in all, and skips a too-deep object whole. Used wherever model text is searched for JSON
(the GIANT agent's free-JSON actions, tool calls a local server writes in its text, answer extraction,
which also reads single-quoted Python dicts with ``python_literals``, and the judges' raw answer text,
which is read whole up to its own limit with ``window``).
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from typing import Any

MAX_PARSED_CHARS = 65_536  # a reply's JSON is looked for in its last 64 KiB only
DECODE_BUDGET = 8_000_000  # characters the scan may read in all (failed attempts included)
_WINDOW = 4096  # a JSON value is first decoded from this many characters
_DECODER = json.JSONDecoder()
_OBJECT_START = re.compile(r'\{[ \t\n\r]*["}]')
_LITERAL_START = re.compile(r"""\{[ \t\n\r]*["'}]""")
MAX_LITERAL_CHARS = 4096  # a Python-literal dict is read only when its braces span at most this


def json_objects(
    text: str, *, python_literals: bool = False, window: int = MAX_PARSED_CHARS
) -> list[dict[str, Any]]:
    """Every top-level JSON object embedded in the last ``window`` characters of ``text`` (prose and code
    fences around them are fine), in text order. Bounded: an object nested past the recursion limit is
    skipped whole, and the scan stops after reading DECODE_BUDGET characters (a degenerate reply of
    unclosed braces). ``python_literals``: where JSON fails, a single-quoted Python dict
    (``{'answer': 3}``) of at most MAX_LITERAL_CHARS between matching braces is read too."""
    text = text[-window:]
    start = _LITERAL_START if python_literals else _OBJECT_START
    found: list[dict[str, Any]] = []
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
        if obj is None and python_literals:
            closing = _closing_braces(text) if closing is None else closing
            close = closing.get(i)
            if close is not None and close - i < MAX_LITERAL_CHARS:
                budget -= close + 1 - i
                obj = _literal(text[i : close + 1])
                end = close + 1 if obj is not None else end
        if isinstance(obj, dict):
            found.append(obj)
        i = _next_object(text, end if obj is not None else i + 1, start)
    return found


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


def _decode_at(text: str, i: int) -> tuple[Any, int, int]:
    """(object or None, end, characters read) of the JSON value starting at ``i``.

    Decoded from a slice of _WINDOW characters first, so a failure costs what was read, not ``i``
    (``JSONDecodeError`` counts the lines before its position); only a value the window cut short is
    decoded again from the whole rest of the text. A value Python refuses (an integer of more than 4300
    digits) is no object, like any other that does not decode.
    """
    chunk = text[i : i + _WINDOW]
    for attempt in (1, 2):
        try:
            obj, n = _DECODER.raw_decode(chunk)
            return obj, i + n, n
        except json.JSONDecodeError as exc:
            cut_short = exc.pos >= len(chunk) - 1 or exc.msg.startswith("Unterminated")
            if attempt == 2 or not cut_short or i + len(chunk) >= len(text):
                return None, i + 1, max(1, exc.pos) + (len(chunk) if attempt == 2 else 0)
            chunk = text[i:]
        except ValueError:  # an integer of more than 4300 digits (Python's int limit): not an object here
            return None, i + 1, len(chunk)
    raise AssertionError("unreachable")


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
