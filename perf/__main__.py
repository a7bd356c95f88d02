"""`python -m perf` (or `make perf`): run every perf/bench_*.py module's main()."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
from pathlib import Path


def main() -> None:
    names = sorted(
        m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if m.name.startswith("bench_")
    )
    wanted = set(sys.argv[1:])
    selectors = set(names) | {n.removeprefix("bench_") for n in names}
    options = [a for a in sys.argv[1:] if a not in selectors]  # e.g. bench_throughput's fast-model
    for name in names:
        if wanted and name.removeprefix("bench_") not in wanted and name not in wanted:
            continue
        print(f"\n=== {name} ===", flush=True)
        started = time.perf_counter()
        sys.argv = [f"perf.{name}", *options]  # a bench's argparse sees its options, not the names chosen
        importlib.import_module(f"perf.{name}").main()
        print(f"({name}: {time.perf_counter() - started:.1f}s)")


if __name__ == "__main__":
    main()
