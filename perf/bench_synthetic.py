"""The synthetic slides' renderer (slides/synthetic.py: rows painted as slices, the texture band by band)
against its per-pixel definition (a mask per blob, tests/slides/test_synthetic.py, the renderer it
replaced): CPU of this process to render the bundled sample's nine designs at level 0, median of
``--repeats`` alternating rounds, checked equal; then writing the nine slides (ensure_sample_slides: the
demo's first ingest, every fresh data folder) with the renderer as shipped.

    python -m perf.bench_synthetic [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from giant_assets.multipathqa.sample import SAMPLE_SLIDES, ensure_sample_slides
from giant_assets.slides.synthetic import render_level
from tests.slides.test_synthetic import per_pixel


def _cpu(render) -> float:
    started = time.process_time()
    for slide in SAMPLE_SLIDES:
        render(slide.design, 1)
    return time.process_time() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    for slide in SAMPLE_SLIDES[:2]:
        np.testing.assert_array_equal(render_level(slide.design, 1), per_pixel(slide.design, 1))
    shipped, definition = [], []
    for _ in range(args.repeats):
        shipped.append(_cpu(render_level))
        definition.append(_cpu(per_pixel))
    a, b = statistics.median(shipped), statistics.median(definition)
    print(f"render the sample's {len(SAMPLE_SLIDES)} designs at level 0 (4096 x 3072 or 4096 x 2048), CPU-s")
    print(f"  per-pixel definition  {b:6.2f}")
    print(f"  shipped renderer      {a:6.2f}   ratio {a / b:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        started = time.process_time()
        ensure_sample_slides(Path(tmp) / "wsi")
        cpu = time.process_time() - started
        print(f"ensure_sample_slides (render, 4 levels, zlib/JPEG tiles): {cpu:.2f} CPU-s")


if __name__ == "__main__":
    main()
