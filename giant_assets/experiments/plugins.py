"""Third-party agents an experiment names: ``agent: "package.module:factory"`` (docs/plugins.md).

This module knows a plug-in by its name only: whether a name is one (``is_plugin``), its
``agent_options`` made JSON-safe (``check_options``), what identifies its code in ``config_hash``
(``plugin_identity``: its distribution's name and version, or its file's content digest) and its
factory, imported (``load_factory``). Building and running it is ``agents/plugin_agent.py``.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.metadata
import importlib.util
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

PLUGIN_REF = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")
MAX_REF_CHARS = 200
MAX_DEPTH = 16  # nesting of agent_options (mappings and lists)
MAX_NODES = 10_000  # values in all of agent_options
MAX_TEXT = 10_000  # characters of one string (a key included)
MAX_INT = 2**53  # integers a JSON reader keeps exactly
CALLS_ATTRIBUTE = "expected_calls"  # on the factory: the model calls of one run, per model
MAX_CALLS = 1000  # model calls of one run, per model, a declaration may give
MAX_MODELS = 16


class PluginError(ValueError):
    """A plug-in cannot be used; the message names the module (and the field)."""


def is_plugin(agent: str) -> bool:
    """Whether ``agent`` names a plug-in (``package.module:factory``) rather than a built-in agent."""
    return ":" in agent


def check_ref(agent: str) -> str:
    """``agent`` if it is a well-formed plug-in name, else a ``ValueError`` saying what one looks like."""
    if len(agent) > MAX_REF_CHARS or not PLUGIN_REF.match(agent):
        shown = agent if len(agent) <= 80 else agent[:80] + "..."
        raise ValueError(
            f"{shown!r} is not a plug-in name: write 'package.module:factory' (Python identifiers, "
            f"at most {MAX_REF_CHARS} characters)"
        )
    return agent


def check_options(value: Any) -> dict[str, Any]:
    """``agent_options`` as plain JSON values (a fresh copy), or a ``ValueError`` naming the first bad
    value's place (``agent_options.a.0``): keys are strings, numbers finite and within 2**53, strings at
    most ``MAX_TEXT`` characters, at most ``MAX_DEPTH`` levels and ``MAX_NODES`` values in all."""
    if not isinstance(value, dict):
        raise ValueError(f"must be a mapping of options, not {_kind(value)}")
    out: dict[str, Any] = {}
    todo: list[tuple[Any, Any, str, int]] = [(value, out, "agent_options", 1)]  # (source, copy, place, depth)
    nodes = 0
    while todo:
        source, copy, place, depth = todo.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in items:
            nodes += 1
            if nodes > MAX_NODES:
                raise ValueError(f"more than {MAX_NODES} values in agent_options")
            if isinstance(source, dict) and (not isinstance(key, str) or len(key) > MAX_TEXT):
                raise ValueError(f"{place}: key {_short(key)} must be a text of at most {MAX_TEXT} chars")
            where = f"{place}.{key}"
            if isinstance(item, dict | list | tuple):
                if depth >= MAX_DEPTH:
                    raise ValueError(f"{where}: nested deeper than {MAX_DEPTH} levels")
                child: Any = {} if isinstance(item, dict) else []
                todo.append((item, child, where, depth + 1))
                item_copy = child
            else:
                item_copy = _scalar(item, where)
            if isinstance(copy, dict):
                copy[key] = item_copy
            else:
                copy.append(item_copy)
    return out


def _scalar(value: Any, where: str) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) > MAX_INT:  # abs() of a 5,000-digit integer is cheap; printing it is not
            raise ValueError(f"{where}: the integer is beyond +-2**53 (JSON readers lose its digits)")
        return value
    if isinstance(value, float):
        if not math.isfinite(value) or abs(value) > MAX_INT:
            raise ValueError(f"{where}: {value!r} is not a finite number within +-2**53")
        return value
    if isinstance(value, str):
        if len(value) > MAX_TEXT:
            raise ValueError(f"{where}: a text of {len(value)} characters (at most {MAX_TEXT})")
        return value
    raise ValueError(
        f"{where}: {_kind(value)} is not a JSON value (text, number, true/false, null, list, mapping)"
    )


def _kind(value: Any) -> str:
    return f"a {type(value).__name__}"


def _short(value: Any) -> str:
    try:  # repr of a 5,000-digit integer (even inside a list) raises ValueError
        text = repr(value) if not isinstance(value, int) or abs(value) < 10**20 else "(a long integer)"
    except ValueError:
        text = f"a {type(value).__name__} holding a long integer"
    return text if len(text) <= 60 else text[:60] + "..."


@functools.lru_cache(maxsize=64)
def distributions_providing(top: str, path: tuple[str, ...]) -> tuple[str, ...]:
    """The names of the installed distributions (on the Python path ``path``) that provide the top-level
    package ``top``: ``importlib.metadata.packages_distributions().get(top, [])``, found without turning
    every distribution's file list into paths (~0.5 s of CPU in this venv; ~0.06 s here): a distribution
    declares its packages (top_level.txt), else those are inferred from its file list exactly as the
    standard library does, read only for a distribution whose list names ``top`` at all. Read once per
    process, name and path (``config_hash`` asks each time a plug-in experiment's settings are hashed);
    a distribution installed into a folder already on the path later is seen by the next process."""
    names = []
    for dist in importlib.metadata.distributions(path=list(path)):
        declared = (dist.read_text("top_level.txt") or "").split()
        if declared:
            provides = top in declared
        else:
            listing = (dist.read_text("RECORD") or "") + (dist.read_text("SOURCES.txt") or "")
            provides = top in listing and any(
                (f.parts[0] if len(f.parts) > 1 else f.with_suffix("").name) == top
                for f in dist.files or ()
                if f.suffix == ".py"
            )
        if provides:
            names.append(dist.metadata["Name"])
    return tuple(names)


def plugin_identity(agent: str) -> dict[str, Any]:
    """What identifies the plug-in's code in ``config_hash``: its module and factory, and the name and
    version of the distribution that installed the module (``importlib.metadata``), or, for a module
    from no distribution, the SHA-256 of its file. Finding the module imports its parent packages,
    not the module itself."""
    module, factory = agent.split(":", 1)
    identity: dict[str, Any] = {"module": module, "factory": factory}
    top = module.split(".", 1)[0]
    names = sorted(set(distributions_providing(top, tuple(sys.path))))
    if names:
        versions = [f"{name}=={importlib.metadata.version(name)}" for name in names]
        return identity | {"distribution": ", ".join(versions)}
    origin = _module_file(agent, module)
    try:
        digest = hashlib.sha256(Path(origin).read_bytes()).hexdigest()
    except OSError as exc:
        raise PluginError(f"plug-in {agent!r}: module {module!r}: {origin} cannot be read ({exc})") from exc
    return identity | {"sha256": digest}


def unimportable(agent: str) -> str | None:
    """The short state of a plug-in whose module cannot be found (its code cannot be identified, so it
    has no config hash and cannot run), or None; what ``list`` and ``status`` show instead of raising.
    Finds the module as ``plugin_identity`` does, without importing it (``check`` imports it, and says why
    it fails)."""
    if not is_plugin(agent):
        return None
    try:
        plugin_identity(agent)
    except PluginError:
        return f"plug-in cannot be imported: module {agent.split(':', 1)[0]!r}"
    return None


def _module_file(agent: str, module: str) -> str:
    try:
        spec = importlib.util.find_spec(module)
    except Exception as exc:  # a parent package that fails to import: any exception of its code
        raise PluginError(f"plug-in {agent!r}: module {module!r} cannot be found ({_why(exc)})") from None
    if spec is None:
        raise PluginError(
            f"plug-in {agent!r}: no module {module!r} on the Python path (install its package, or add its "
            "folder to PYTHONPATH)"
        )
    if not spec.origin or spec.origin in ("built-in", "frozen") or not Path(spec.origin).is_file():
        raise PluginError(f"plug-in {agent!r}: module {module!r} has no source file to identify it by")
    return spec.origin


def load_factory(agent: str) -> Callable[..., Any]:
    """The plug-in's factory, its module imported; a ``PluginError`` naming the module otherwise."""
    module, name = agent.split(":", 1)
    try:
        loaded = importlib.import_module(module)
    except Exception as exc:  # its code may raise anything while importing
        raise PluginError(f"plug-in {agent!r}: module {module!r} cannot be imported ({_why(exc)})") from None
    factory = getattr(loaded, name, None)
    if not callable(factory):
        raise PluginError(f"plug-in {agent!r}: module {module!r} has no callable {name!r}")
    return factory


def declared_calls(agent: str, options: dict[str, Any], model: str) -> dict[str, tuple[int, int]]:
    """The model calls one run of the plug-in makes, per model name: (fewest, most), as its factory's
    ``expected_calls(options, model)`` declares them (``model``: the experiment's). A ``PluginError``
    when the plug-in declares none, or declares something else than such a mapping."""
    factory = load_factory(agent)
    declare = getattr(factory, CALLS_ATTRIBUTE, None)
    if declare is None:
        raise PluginError(
            f"plug-in {agent!r} declares no expected calls (no {CALLS_ATTRIBUTE} on its factory)"
        )
    if not callable(declare):
        raise PluginError(f"plug-in {agent!r}: {CALLS_ATTRIBUTE} is not a function")
    try:
        value = declare(check_options(options), model)
    except Exception as exc:  # its code may raise anything
        raise PluginError(f"plug-in {agent!r}: {CALLS_ATTRIBUTE} raised {_why(exc)}") from None
    return _calls(agent, value)


def _calls(agent: str, value: Any) -> dict[str, tuple[int, int]]:
    """A declaration checked: {model name: n or [low, high]}, whole numbers 0..MAX_CALLS, low <= high."""
    where = f"plug-in {agent!r}: {CALLS_ATTRIBUTE}"
    if not isinstance(value, dict) or not 1 <= len(value) <= MAX_MODELS:
        raise PluginError(f"{where} must return a mapping of 1 to {MAX_MODELS} model names to calls per run")
    out: dict[str, tuple[int, int]] = {}
    for name, calls in value.items():
        if not isinstance(name, str) or not name.strip() or len(name) > 200:
            raise PluginError(f"{where}: a model name is a text of 1 to 200 characters, not {_short(name)}")
        pair = list(calls) if isinstance(calls, list | tuple) else [calls, calls]
        whole = all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= MAX_CALLS for n in pair)
        if len(pair) != 2 or not whole or pair[0] > pair[1]:
            raise PluginError(
                f"{where}: model {name[:80]!r}: calls per run are a whole number 0..{MAX_CALLS} or "
                f"[fewest, most], not {_short(calls)}"
            )
        out[name] = (pair[0], pair[1])
    return out


def _why(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 300 else text[:300] + "..."
