"""Paths built from data (CSV cells, submission content) stay inside their folder, whatever the data says.

``confined_path(root, *parts)`` is the one way to turn such values into a path: every part becomes
exactly one file or folder name by a reversible, filesystem-safe encoding (percent-encoding of UTF-8
bytes, as in URLs):

- letters, digits, ``_``, ``-``, ``.`` and ``~`` stay as they are (``TCGA-05-4244`` is unchanged);
- every other byte is ``%XX`` (``/`` -> ``%2F``, ``\\`` -> ``%5C``, space -> ``%20``, ``%`` -> ``%25``,
  NUL -> ``%00``, tab -> ``%09``, newline -> ``%0A``; ``é`` -> ``%C3%A9``);
- a leading ``.`` is ``%2E`` (so ``.``, ``..`` and hidden names cannot occur: ``..`` -> ``%2E.``).

``decode_component`` inverts it (``urllib.parse.unquote``). Names are compared byte for byte, so on a
case-insensitive file system ``A`` and ``a`` would share a folder. An empty part, or one whose encoded
name exceeds 255 bytes (the usual file-name limit), is refused with ``UnsafePathError``.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote, unquote

MAX_NAME_BYTES = 255


class UnsafePathError(ValueError):
    """A path part that cannot be made into one safe name, or a path that would leave its root."""


def encode_component(value: str) -> str:
    """One file or folder name for ``value`` (see the module docstring); reversible."""
    if not isinstance(value, str) or value == "":
        raise UnsafePathError(f"empty or non-text path part {value!r}")
    name = quote(value, safe="-_.~", errors="surrogateescape")
    if name.startswith("."):
        name = "%2E" + name[1:]
    if len(name.encode("ascii")) > MAX_NAME_BYTES:
        raise UnsafePathError(
            f"path part {value[:60]!r}... encodes to {len(name)} bytes, "
            f"over the {MAX_NAME_BYTES}-byte file-name limit"
        )
    return name


def decode_component(name: str) -> str:
    """The original value of a name made by ``encode_component``."""
    return unquote(name, errors="surrogateescape")


def confined_path(root: Path | str, *parts: str) -> Path:
    """``root/<part>/<part>/...`` with each part encoded to one name, so never outside ``root``.

    Symbolic links the user placed inside ``root`` are trusted (not resolved): data cannot create them.
    """
    return Path(os.path.abspath(root)).joinpath(*(encode_component(str(p)) for p in parts))
