"""Installed size of giant-assets' runtime and of what its ``dev`` extra adds, in the running venv.

Both come from one venv (the one with the dev extra installed): the runtime is every distribution in the
dependency closure of ``giant-assets`` (its requirements, their requirements, ... with environment
markers evaluated here); the dev extra adds the closure of ``giant-assets[dev]`` minus that. A
distribution's size is the sum of the files its RECORD lists (the files pip installed: code, compiled
``__pycache__`` written later is not listed). The venv's site-packages folder is measured as well.
"""

from __future__ import annotations

import os
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PROJECT = "giant-assets"


def closure(name: str, extras: tuple[str, ...] = ()) -> set[str]:
    """Canonical names of ``name`` and every distribution it needs with ``extras``, as installed here."""
    seen: set[str] = set()
    todo = [(name, set(extras))]
    done: set[tuple[str, frozenset[str]]] = set()
    while todo:
        current, wanted = todo.pop()
        key = (canonicalize_name(current), frozenset(wanted))
        if key in done:
            continue
        done.add(key)
        try:
            dist = metadata.distribution(current)
        except metadata.PackageNotFoundError:
            continue  # a requirement whose marker matched but is not installed: nothing on disk
        seen.add(canonicalize_name(dist.metadata["Name"]))
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or any(req.marker.evaluate({"extra": extra}) for extra in (wanted or {""})):
                todo.append((req.name, set(req.extras)))
    return seen


def dist_bytes(name: str) -> int:
    """Bytes of the files ``name``'s RECORD lists (files gone since are skipped)."""
    total = 0
    for file in metadata.distribution(name).files or []:
        path = Path(str(file.locate()))
        if path.is_file():
            total += path.stat().st_size
    return total


def folder_bytes(folder: Path) -> int:
    return sum(
        (Path(root) / f).stat().st_size
        for root, _, files in os.walk(folder)
        for f in files
        if not (Path(root) / f).is_symlink()
    )


def site_packages() -> Path:
    return Path(metadata.distribution("pip").locate_file("")).resolve()


def sizes() -> dict[str, float]:
    """GB (10**9 bytes) of the runtime closure, what ``dev`` adds, and the whole site-packages."""
    runtime = closure(PROJECT)
    dev = closure(PROJECT, ("dev",)) - runtime
    gb = 1e9
    return {
        "runtime_gb": sum(map(dist_bytes, runtime)) / gb,
        "runtime_distributions": len(runtime),
        "dev_extra_gb": sum(map(dist_bytes, dev)) / gb,
        "dev_extra_distributions": len(dev),
        "site_packages_gb": folder_bytes(site_packages()) / gb,
    }


def report() -> str:
    s = sizes()
    return (
        f"installed size ({sys.prefix}): runtime {s['runtime_gb']:.2f} GB "
        f"({s['runtime_distributions']} distributions), the dev extra adds {s['dev_extra_gb']:.2f} GB "
        f"({s['dev_extra_distributions']}); site-packages in all {s['site_packages_gb']:.2f} GB "
        "(with __pycache__ and what neither needs, e.g. pip)"
    )


if __name__ == "__main__":
    print(report())
