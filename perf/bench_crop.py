"""Crops of a 16384 x 12288, 5-level generated slide: pyramid-level reads vs reading level 0 and resizing.

The slide is written once into a temp dir. For each box, ``crop`` (coarsest level that still gives the
1024 px target) is timed against the naive baseline (read the box at level 0, resize to 1024); both
images are compared so the speed-up is not bought with a different picture.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from giant_assets.slides.access import crop, open_slide, output_size
from giant_assets.slides.synthetic import LESION, TISSUE, Blob, SlideDesign, write_pyramidal_slide
from perf.timing import best_of

TARGET = 1024
TARGET_RATIO = 10.0  # for the largest box (a naive level-0 read of a 12288 px box alone takes ~20 s)
DESIGN = SlideDesign(
    16384,
    12288,
    tissue=(Blob(8192, 6144, 7000, 5200, TISSUE),),
    lesions=(Blob(5000, 4000, 900, 700, LESION), Blob(11000, 8000, 400, 600, LESION)),
)
BOXES = [
    [2000, 1000, 8192, 8192],
    [4000, 3000, 4096, 4096],
    [4500, 3500, 2048, 2048],
    [4800, 3800, 1024, 1024],
]


def naive(slide, box: list[int]) -> Image.Image:
    x, y, w, h = box
    return (
        slide.read_region((x, y), 0, (w, h)).convert("RGB").resize(output_size(w, h, TARGET), Image.LANCZOS)
    )


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        path = write_pyramidal_slide(Path(tmp) / "big.tiff", DESIGN, levels=5)
        print(
            f"generated {DESIGN.width}x{DESIGN.height} 5-level slide in {time.perf_counter() - started:.1f}s"
        )
        print(f"{'box (level-0 w x h)':>20} {'level':>5} {'read px':>11} {'crop s':>8} {'level-0 s':>9} "
              f"{'ratio':>7} {'mean |diff|':>11}")  # fmt: skip
        ratios = []
        with open_slide(path) as slide:
            for box in BOXES:
                t_fast, res = best_of(lambda b=box: crop(slide, b, TARGET), 3)
                t_slow, ref = best_of(lambda b=box: naive(slide, b), 1 if box[2] > 4096 else 2)
                diff = np.abs(np.asarray(res.image, dtype=np.int16) - np.asarray(ref, dtype=np.int16)).mean()
                ratios.append(t_slow / t_fast)
                print(f"{box[2]:>9} x {box[3]:<8} {res.level:>5} {res.read_size[0]:>5}x{res.read_size[1]:<5} "
                      f"{t_fast:>8.3f} {t_slow:>9.3f} {t_slow / t_fast:>6.1f}x {diff:>11.2f}")  # fmt: skip
    verdict = "met" if ratios[0] >= TARGET_RATIO else "MISSED"
    print(
        f"largest box: {ratios[0]:.0f}x faster than reading level 0 (target >= {TARGET_RATIO:g}x: {verdict})"
    )


if __name__ == "__main__":
    main()
