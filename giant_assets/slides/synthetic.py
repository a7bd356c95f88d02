"""Write small but real pyramidal slides (tiled TIFF or Aperio-style SVS) that OpenSlide opens.

Used for the bundled demo sample and by tests; the pixel content is a deterministic function of
level-0 coordinates so tests can check what a crop must contain.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

BACKGROUND = (242, 242, 242)
TISSUE = (226, 160, 196)
LESION = (92, 40, 120)


@dataclass(frozen=True)
class Blob:
    """An axis-aligned ellipse painted into the slide, in level-0 pixels (centre, radii)."""

    cx: int
    cy: int
    rx: int
    ry: int
    color: tuple[int, int, int]

    @property
    def box_xywh(self) -> list[int]:
        return [self.cx - self.rx, self.cy - self.ry, 2 * self.rx, 2 * self.ry]


@dataclass(frozen=True)
class SlideDesign:
    """What to paint: a background, tissue blobs, then lesion blobs on top."""

    width: int
    height: int
    tissue: Sequence[Blob] = field(default_factory=tuple)
    lesions: Sequence[Blob] = field(default_factory=tuple)
    texture: bool = True  # faint coordinate-dependent texture so crops at different places differ


# A 4096 x 3072 slide with one tissue blob and one small dark lesion: the shared test/benchmark slide.
ONE_LESION_DESIGN = SlideDesign(
    4096,
    3072,
    tissue=(Blob(2048, 1536, 1700, 1300, TISSUE),),
    lesions=(Blob(2800, 1100, 220, 180, LESION),),
)


GRAIN_PX, GRAIN = 32, 6  # the texture: a checkerboard of 32 px level-0 squares, every other one darker by 6


def render_level(design: SlideDesign, downsample: int) -> np.ndarray:
    """Render the design at ``downsample`` (sampling level-0 pixel centres), as uint8 RGB.

    A blob covers, on each row, one run of columns (|x - cx| <= its half width there), so rows are painted
    as slices copied from a row of the blob's colour, and the texture is applied band by band of rows of
    one parity: whole-row copies numpy does at memory speed (a 4096 x 3072 level ~25 ms, was ~400 ms with a
    mask per blob; tests/slides/test_synthetic.py checks it against that per-pixel definition)."""
    h = design.height // downsample
    w = design.width // downsample
    ys = np.arange(h) * downsample
    xs = np.arange(w) * downsample
    img = np.empty((h, w, 3), dtype=np.uint8)
    colour_row = np.empty((w, 3), dtype=np.uint8)
    colour_row[:] = BACKGROUND
    img[:] = colour_row
    for blob in (*design.tissue, *design.lesions):
        first = int(np.searchsorted(ys, blob.cy - blob.ry, side="left"))
        end = int(np.searchsorted(ys, blob.cy + blob.ry, side="right"))
        if end <= first:
            continue
        with np.errstate(invalid="ignore", divide="ignore"):  # ry == 0: no row is painted, as by the mask
            half_width = blob.rx * np.sqrt(
                np.clip(1.0 - ((ys[first:end] - blob.cy) / blob.ry) ** 2, 0.0, None)
            )
        # |x - cx| is a whole number, so |x - cx| <= half_width is |x - cx| <= floor(half_width)
        reach = np.floor(np.where(np.isfinite(half_width), half_width, -1)).astype(np.int64)
        starts = np.searchsorted(xs, blob.cx - reach, side="left").tolist()
        stops = np.searchsorted(xs, blob.cx + reach, side="right").tolist()
        colour_row[:] = blob.color
        for row, start, stop in zip(range(first, end), starts, stops, strict=True):
            if stop > start:
                img[row, start:stop] = colour_row[start:stop]
    if design.texture and h:  # a level of no rows has no texture to apply
        col_parity = ((xs // GRAIN_PX) % 2).astype(np.uint8)
        grain = [np.repeat((parity ^ col_parity) * np.uint8(GRAIN), 3).reshape(w, 3) for parity in (0, 1)]
        row_parity = (ys // GRAIN_PX) % 2
        edges = (np.flatnonzero(np.diff(row_parity)) + 1).tolist()
        for start, stop in zip([0, *edges], [*edges, h], strict=True):
            band = img[start:stop]
            band -= np.minimum(band, grain[int(row_parity[start])])
    return img


def write_pyramidal_slide(
    path: Path | str,
    design: SlideDesign,
    levels: int = 4,
    tile: int = 256,
    svs: bool = False,
    mpp: float = 0.5,
    level_factor: int = 2,
) -> Path:
    """Write a tiled pyramid with ``levels`` levels (downsample ``level_factor**k``); ``svs``: Aperio SVS."""
    import tifffile  # ~15 ms to import; the Dagster definitions import this module, few runs write slides

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    w, h = design.width, design.height
    with tifffile.TiffWriter(path, bigtiff=False) as tw:
        for lv in range(levels):
            ds = level_factor**lv
            im = render_level(design, ds)
            desc: str | None = None
            if svs:
                head = f"Aperio Image Library v12.0.15\r\n{w}x{h} [0,0 {w}x{h}] ({tile}x{tile}) JPEG/RGB Q=90"
                if lv:
                    head = f"Aperio Image Library v12.0.15\r\n{w}x{h} -> {im.shape[1]}x{im.shape[0]} - "
                desc = f"{head}|AppMag = 20|MPP = {mpp:.4f}"
            tw.write(
                im,
                tile=(tile, tile),
                photometric="rgb",
                compression="jpeg" if svs else "zlib",
                compressionargs={"level": 90} if svs else {"level": 1},
                description=desc,
                metadata=None,
                subfiletype=0 if lv == 0 else 1,
                resolution=None if svs else (1e4 / mpp, 1e4 / mpp),
                resolutionunit=None if svs else "CENTIMETER",
            )
    return path
