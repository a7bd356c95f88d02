"""A module docstring as a command's ``--help`` text: reStructuredText markup removed."""

from __future__ import annotations

import re

_ROLE = re.compile(r":[a-z]+:`([^`]*)`")  # :func:`x` -> x


def plain(text: str) -> str:
    """``text`` without ``double backquotes`` and :role:`targets` (their contents stay)."""
    return _ROLE.sub(r"\1", text).replace("``", "")
