"""Every import between the package's sub-packages points down the documented layer order."""

from __future__ import annotations

import ast
from pathlib import Path

import giant_assets

# docs/architecture.md: a package imports only from those after it
ORDER = [
    "cluster", "demo", "platform", "report", "grading", "judges", "agents", "eval", "geometry", "runs",
    "experiments", "benchmarks", "multipathqa", "slides", "core", "reference",
]  # fmt: skip
ROOT = Path(giant_assets.__file__).parent


def imports_between_packages() -> list[tuple[str, str, str]]:
    """(importing package, imported package, file) for every giant_assets import, lazy ones included."""
    found = []
    for path in ROOT.rglob("*.py"):
        package = path.relative_to(ROOT).parts[0]
        if package.endswith(".py"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] == "giant_assets" and len(parts) > 1 and parts[1] != package:
                    found.append((package, parts[1], str(path.relative_to(ROOT))))
    return found


def test_every_import_points_down_the_layers() -> None:
    edges = imports_between_packages()
    packages = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages <= set(ORDER), f"a package missing from the documented order: {packages - set(ORDER)}"
    assert len(edges) > 50  # the scan sees the imports
    upward = [(src, dst, f) for src, dst, f in edges if ORDER.index(dst) <= ORDER.index(src)]
    assert upward == [], upward
