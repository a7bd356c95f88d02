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


def render_level(design: SlideDesign, downsample: int) -> np.ndarray:
    """Render the design at ``downsample`` (sampling level-0 pixel centres), as uint8 RGB."""
    h = design.height // downsample
    w = design.width // downsample
    ys = np.arange(h) * downsample
    xs = np.arange(w) * downsample
    img = np.empty((h, w, 3), dtype=np.uint8)
    img[:] = BACKGROUND
    for blob in (*design.tissue, *design.lesions):
        rows = np.nonzero(np.abs(ys - blob.cy) <= blob.ry)[0]
        cols = np.nonzero(np.abs(xs - blob.cx) <= blob.rx)[0]
        if rows.size == 0 or cols.size == 0:
            continue
        half_width = blob.rx * np.sqrt(np.clip(1.0 - ((ys[rows] - blob.cy) / blob.ry) ** 2, 0.0, None))
        mask = np.abs(xs[cols] - blob.cx)[None, :] <= half_width[:, None]
        block = img[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1]
        np.copyto(block, np.asarray(blob.color, dtype=np.uint8), where=mask[..., None])
    if design.texture:
        row_parity = ((ys // 32) % 2).astype(np.uint8)
        col_parity = ((xs // 32) % 2).astype(np.uint8)
        grain = (row_parity[:, None] ^ col_parity[None, :]) * np.uint8(6)
        img -= np.minimum(img, grain[..., None])
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
    base = render_level(design, 1)
    with tifffile.TiffWriter(path, bigtiff=False) as tw:
        for lv in range(levels):
            ds = level_factor**lv
            im = np.ascontiguousarray(base[::ds, ::ds])  # equals render_level(design, ds)
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
