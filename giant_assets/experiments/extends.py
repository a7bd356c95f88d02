"""``extends: NAME`` in an experiment: start from the settings of experiment NAME of the same file.

The experiment's own fields then replace or add to them (``name`` and ``extends`` are never inherited);
a chain (``a`` extends ``b`` extends ``c``) is followed to its end. It is resolved before validation, so
the result is an ordinary experiment: its ``config_hash`` is that of the same block written out in full.
Why ``extends`` rather than YAML anchors and merge keys (``<<: *giant``): docs/table1-recipes.md.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

EXTENDS = "extends"
_NOT_INHERITED = frozenset({"name", EXTENDS})


class ExtendsError(ValueError):
    """An ``extends`` that cannot be followed; ``experiment`` names the block whose field is wrong."""

    def __init__(self, experiment: str, message: str) -> None:
        super().__init__(message)
        self.experiment = experiment


def parent_of(name: str, body: Any, bodies: Mapping[str, Any]) -> str | None:
    """The experiment ``body`` extends (checked to be another declared one); None when it extends none."""
    if not isinstance(body, dict) or EXTENDS not in body:
        return None
    parent = body[EXTENDS]
    if not isinstance(parent, str) or not parent.strip():
        shown = repr(parent)[:80]
        raise ExtendsError(name, f"field 'extends': the name of another experiment of this file, not {shown}")
    if parent not in bodies:
        close = difflib.get_close_matches(parent, [str(n) for n in bodies], n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ExtendsError(name, f"field 'extends': no experiment {parent[:80]!r} in this file{hint}")
    if parent == name:
        raise ExtendsError(name, "field 'extends': an experiment cannot extend itself")
    return parent


def resolve_extends(bodies: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, list[str]]]:
    """(every experiment's body with the settings it extends beneath its own, the experiments each one
    that extends another inherits from, nearest first); a body that extends nothing is returned as is."""
    resolved: dict[str, Any] = {}
    via: dict[str, list[str]] = {}
    for name in bodies:
        chain = [name]  # name, its parent, the parent's parent, ... up to one already resolved or a root
        while chain[-1] not in resolved:
            parent = parent_of(chain[-1], bodies[chain[-1]], bodies)
            if parent is None:
                resolved[chain[-1]] = bodies[chain[-1]]
                break
            if parent in chain:
                loop = " -> ".join(map(repr, [*chain[chain.index(parent) :], parent]))
                raise ExtendsError(name, f"field 'extends': circular ({loop})")
            chain.append(parent)
        for child, parent in zip(reversed(chain[:-1]), reversed(chain[1:]), strict=True):
            base = resolved[parent]
            if base is not None and not isinstance(base, dict):
                raise ExtendsError(child, f"field 'extends': {parent!r} is not a mapping of settings")
            inherited = {k: v for k, v in (base or {}).items() if k not in _NOT_INHERITED}
            resolved[child] = inherited | {k: v for k, v in bodies[child].items() if k != EXTENDS}
            via[child] = [parent, *via.get(parent, [])]
    return resolved, via
