"""QuPath import of a large cell export: a generated QuPath 0.4 "Export objects" file (compact, ~128 MB:
60,000 cells with nucleus and 40 measurements, plus 10 annotations) read by ``import_qupath`` in a fresh
child process, which reports its wall time and its own peak RSS (before and after the import).
``BENCH_QUPATH_CODE`` points the child at another checkout (e.g. the code before streaming) to compare.

Measured on the shared 2-core machine (2026-11-28): before streaming 182.6 s and a peak RSS of 993 MB
(+840 MB for the import); streamed 11.6 to 23.1 s (by the load of the machine) and 181 MB (+28 MB).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

N_CELLS = 60_000
SLIDE = "BENCH-01.svs"
WIDTH, HEIGHT = 100_000, 80_000
ROOT = Path(__file__).parents[1]

WRITE = f"""
import sys
from pathlib import Path
from tests.support.qupath_layouts import Obj, cell_objects, rect, write_export
annotations = [Obj("annotation", rect(1000 * i, 1000, 500, 400), ("Tumor",)) for i in range(1, 11)]
write_export(Path(sys.argv[1]), [*annotations, *cell_objects({N_CELLS}, {WIDTH}, {HEIGHT})], "0.4")
"""

READ = f"""
import resource, sys, time
from pathlib import Path
import pandas as pd
from giant_assets.eval.qupath import import_qupath
items = pd.DataFrame({{"benchmark_name": ["b"], "benchmark_id": ["0"], "image_path": ["{SLIDE}"],
                      "width": [{WIDTH}.0], "height": [{HEIGHT}.0]}})
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
started = time.perf_counter()
frame, summary = import_qupath([Path(sys.argv[1])], items)
took = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{{summary.regions}} annotations, skipped {{summary.skipped}}: {{took:.1f}} s, "
      f"peak RSS {{peak:.0f}} MB (+{{peak - before:.0f}} MB for the import)")
"""


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "BENCH-01.geojson"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        subprocess.run([sys.executable, "-c", WRITE, str(path)], env=env, check=True, cwd=ROOT)
        code = os.environ.get("BENCH_QUPATH_CODE", str(ROOT))
        out = subprocess.run(
            [sys.executable, "-c", READ, str(path)],
            env={**os.environ, "PYTHONPATH": code},
            capture_output=True,
            text=True,
            check=False,
        )
        print(f"{path.stat().st_size / 1e6:.0f} MB cell export read by {code}:")
        print(out.stdout.strip() or out.stderr.strip()[-500:])


if __name__ == "__main__":
    main()
