"""One pydantic validation error of an experiment in the platform's words: the field, what it must be,
and for an unknown field the closest valid one (``endpoint`` -> ``azure_endpoint``)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection
from typing import Any

# pydantic's phrasings -> ours; the rest of its message ("a valid integer", "greater than 0") stays
_SHOULD = re.compile(r"^(Input|String|List|Dictionary|Tuple|Set|Value|Number|Float|Integer|Decimal) should\b")
_VALUE_ERROR = "Value error, "
_ASSERTION = "Assertion failed, "


def field_problem(err: dict[str, Any], fields: Collection[str]) -> str:
    """``err`` (one of ``ValidationError.errors()``) as ``field 'x': message``; a check across fields,
    which names its field itself, as its own message."""
    message = str(err.get("msg", ""))
    message = message.removeprefix(_VALUE_ERROR).removeprefix(_ASSERTION)
    loc = ".".join(str(p) for p in err.get("loc", ()))
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        return f"field {loc!r}: not a field of an experiment{_closest(loc, fields)}"
    if kind == "missing":
        return f"field {loc!r}: required"
    message = _SHOULD.sub("must", message)
    if not loc:  # a check across fields: its message names the field(s) itself
        return message
    return f"field {loc!r}: {message}"


def _closest(name: str, fields: Collection[str]) -> str:
    match = difflib.get_close_matches(name, sorted(fields), n=1, cutoff=0.6)
    if match:
        return f"; did you mean {match[0]!r}?"
    return " (docs/experiments.md lists the fields)"
