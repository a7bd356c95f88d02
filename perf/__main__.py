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
    for name in names:
        if wanted and name.removeprefix("bench_") not in wanted and name not in wanted:
            continue
        print(f"\n=== {name} ===", flush=True)
        started = time.perf_counter()
        importlib.import_module(f"perf.{name}").main()
        print(f"({name}: {time.perf_counter() - started:.1f}s)")


if __name__ == "__main__":
    main()
