"""Every benchmark the platform knows: the five built-in MultiPathQA ones, then the declared ones
(``experiments.declared.load_benchmarks`` reads them from the experiments file), through one lookup."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from giant_assets.benchmarks.declaration import Declaration
from giant_assets.multipathqa.benchmarks import BENCHMARK_NAMES, BENCHMARKS, BenchmarkSpec

BUILT_IN_NAMES: tuple[str, ...] = BENCHMARK_NAMES
NO_DECLARATIONS: Mapping[str, Declaration] = {}


def benchmarks(declared: Mapping[str, Declaration] = NO_DECLARATIONS) -> dict[str, BenchmarkSpec]:
    """Built-ins first, in their order, then the ``declared`` ones in the file's order."""
    return dict(BENCHMARKS) | {name: d.spec() for name, d in declared.items()}


def benchmark_names(declared: Mapping[str, Declaration] = NO_DECLARATIONS) -> tuple[str, ...]:
    return tuple(benchmarks(declared))


def benchmark(name: str, declared: Mapping[str, Declaration] = NO_DECLARATIONS) -> BenchmarkSpec:
    """One benchmark by name; an error listing the known names otherwise."""
    known = benchmarks(declared)
    if name not in known:
        raise KeyError(f"no benchmark {name!r}; known: {', '.join(known)}")
    return known[name]


def ordered(names: Iterable[str]) -> list[str]:
    """``names`` for display: the built-ins in their own order, then any other (declared, or no longer
    declared but with stored results) alphabetically."""
    given = {str(n) for n in names}
    return [b for b in BUILT_IN_NAMES if b in given] + sorted(given - set(BUILT_IN_NAMES))


def benchmark_arg(value: str) -> str:
    """argparse ``type`` of a ``--benchmark`` option: a built-in or a possible declared benchmark name
    (safe as a folder name: no '/', no '..')."""
    import argparse

    from giant_assets.benchmarks.declaration import name_problem

    if value not in BUILT_IN_NAMES and name_problem(value):
        raise argparse.ArgumentTypeError(str(name_problem(value)))
    return value
