"""QuPath import of a large cell export: a generated QuPath 0.4 "Export objects" file (compact, ~150 MB:
cells with nucleus and 40 measurements, plus 10 annotations) read by ``giant-qupath import`` in a child
process; wall time and the child's peak RSS. ``BENCH_QUPATH_CODE`` points the child at another checkout
(e.g. the code before streaming) to compare.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support.qupath_layouts import Obj, cell_objects, rect, write_export

N_CELLS = 60_000
SLIDE = "BENCH-01.svs"
WIDTH, HEIGHT = 100_000, 80_000

CHILD = """
import sys, pandas as pd
from pathlib import Path
from giant_assets.eval.qupath import import_qupath
items = pd.DataFrame({"benchmark_name": ["b"], "benchmark_id": ["0"], "image_path": [sys.argv[2]],
                      "width": [float(sys.argv[3])], "height": [float(sys.argv[4])]})
frame, summary = import_qupath([Path(sys.argv[1])], items)
print(summary.regions, summary.skipped)
"""


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "BENCH-01.geojson"
        annotations = [Obj("annotation", rect(1000 * i, 1000, 500, 400), ("Tumor",)) for i in range(1, 11)]
        write_export(path, [*annotations, *cell_objects(N_CELLS, WIDTH, HEIGHT)], "0.4")
        size = path.stat().st_size / 1e6
        code = os.environ.get("BENCH_QUPATH_CODE", str(Path(__file__).parents[1]))
        env = {**os.environ, "PYTHONPATH": code}
        started = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(path), SLIDE, str(WIDTH), str(HEIGHT)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        took = time.perf_counter() - started
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(out.stdout.strip() or out.stderr.strip()[-500:])
        print(
            f"{size:.0f} MB cell export ({N_CELLS} cells) from {code}: {took:.1f} s, peak RSS {peak:.0f} MB"
        )


if __name__ == "__main__":
    main()
