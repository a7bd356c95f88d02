"""A real Leica SCN (BigTIFF with the SCN XML description OpenSlide's leica driver reads) whose image sits at
an offset inside a larger canvas, so OpenSlide reports ``openslide.bounds-x/y/width/height``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tifffile

from giant_assets.slides.synthetic import SlideDesign, render_level

NM_PER_PIXEL = 500  # Leica "clicks" (nanometres) per level-0 pixel: 0.5 um/px


def write_leica_scn(
    path: Path, design: SlideDesign, offset: tuple[int, int], canvas: tuple[int, int], levels: int = 2
) -> Path:
    """Write ``design`` as the one brightfield image of a Leica SCN, at level-0 ``offset`` in a
    ``canvas`` (width, height) collection; pyramid levels halve, JPEG tiles."""
    c = NM_PER_PIXEL
    dims = "".join(
        f'<dimension sizeX="{design.width >> k}" sizeY="{design.height >> k}" r="{k}" ifd="{k}"/>'
        for k in range(levels)
    )
    xml = (
        '<?xml version="1.0" encoding="utf-8"?>'
        '<scn xmlns="http://www.leica-microsystems.com/scn/2010/10/01">'
        f'<collection name="test" sizeX="{canvas[0] * c}" sizeY="{canvas[1] * c}"><barcode>TEST</barcode>'
        '<image name="main"><creationDate>2026-01-01T00:00:00Z</creationDate>'
        '<device model="Leica SCN400" version="1.0"/>'
        f'<pixels sizeX="{design.width}" sizeY="{design.height}">{dims}</pixels>'
        f'<view sizeX="{design.width * c}" sizeY="{design.height * c}" offsetX="{offset[0] * c}" '
        f'offsetY="{offset[1] * c}"/>'
        "<scanSettings><objectiveSettings><objective>20</objective></objectiveSettings>"
        "<illuminationSettings><numericalAperture>0.4</numericalAperture>"
        "<illuminationSource>brightfield</illuminationSource></illuminationSettings></scanSettings>"
        "</image></collection></scn>"
    )
    base = render_level(design, 1)
    with tifffile.TiffWriter(path, bigtiff=True) as tw:
        for k in range(levels):
            tw.write(
                np.ascontiguousarray(base[:: 1 << k, :: 1 << k]),
                tile=(256, 256),
                photometric="rgb",
                compression="jpeg",
                compressionargs={"level": 95},
                description=xml if k == 0 else None,
                metadata=None,
                resolution=(1e7 / c / (1 << k), 1e7 / c / (1 << k)),
                resolutionunit="CENTIMETER",
            )
    return path
