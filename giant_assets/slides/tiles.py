"""Read a slide region straight from its JPEG, JPEG 2000 or lossless tiles (tifffile + imagecodecs)
where that equals OpenSlide.

OpenSlide's ``read_region`` costs several times the decoding of the tiles it covers (it paints them
into a premultiplied ARGB buffer; see docs/perf.md). For the pyramids it can equal exactly, the region
is instead decoded here from the covering tiles only and cut out in numpy:

- vendor ``aperio`` (SVS) or ``generic-tiff``; the OpenSlide level is a tiled TIFF page of the same size,
  8-bit, 3 samples, contiguous, either JPEG-compressed (RGB or YCbCr JPEG) or lossless RGB (no
  compression, LZW, deflate; with or without the horizontal predictor): lossless tiles decode to the
  same pixels whoever decodes them, and OpenSlide paints them unchanged (alpha 255);
- or vendor ``aperio`` with JPEG 2000 RGB tiles (compression 33005): OpenSlide and imagecodecs decode
  them with the same OpenJPEG, lossy (9/7 wavelet) codestreams included, pixel for pixel. Aperio's
  YCbCr JPEG 2000 (33003) is left to OpenSlide, which converts those components with its own arithmetic;
- or vendor ``dicom``: the level is one baseline-JPEG TILED_FULL instance of the series, one fragment per
  frame (``slides.dicom_tiles``);
- the handle is an ``openslide.OpenSlide`` itself (a wrapper, e.g. a test spy recording reads, reads
  through OpenSlide);
- the region lies inside the level, at whole level pixels (``x / downsample`` integral: OpenSlide would
  otherwise resample by a sub-pixel offset), and every covering tile is present (no sparse holes).

Anything else returns None and the caller reads with OpenSlide. tests/slides/test_tiles.py checks the
pixels equal OpenSlide's on generated SVS and TIFF pyramids.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import openslide

DIRECT_VENDORS = ("aperio", "generic-tiff", "dicom")
JPEG = 7  # TIFF compression tag value
LOSSLESS = (1, 5, 8, 32946)  # TIFF compression: none, LZW, Adobe deflate, deflate (old code)
APERIO_JP2K_RGB = 33005  # JPEG 2000 codestreams of RGB components (Aperio)


@dataclass(frozen=True)
class _Level:
    """One pyramid page's tile grid: where each tile's bytes are and how to decode them."""

    width: int
    height: int
    tile_w: int
    tile_h: int
    offsets: tuple[int, ...]
    counts: tuple[int, ...]
    tables: bytes | None
    decode: Callable  # tifffile's decoder of one tile (bytes, index, jpegtables=...) -> (array, ...)
    path: str = ""  # the file holding the tiles (a DICOM-WSI has one file per level); "": the slide's file


class TileReader:
    """The tile grids of one slide file, by OpenSlide level (None: that level is read by OpenSlide)."""

    def __init__(self, path: str, levels: list[_Level | None]) -> None:
        self.path = path
        self.levels = levels

    def read(self, loc: tuple[int, int], level: int, size: tuple[int, int], ds: float) -> np.ndarray | None:
        """RGB pixels of ``read_region(loc, level, size)`` (level-0 ``loc``), or None when not covered."""
        grid = self.levels[level] if level < len(self.levels) else None
        if grid is None:
            return None
        fx, fy = loc[0] / ds, loc[1] / ds
        x, y, (w, h) = int(fx), int(fy), size
        if x != fx or y != fy or x < 0 or y < 0 or x + w > grid.width or y + h > grid.height:
            return None
        tw, th = grid.tile_w, grid.tile_h
        across = -(-grid.width // tw)
        c0, c1, r0, r1 = x // tw, (x + w - 1) // tw, y // th, (y + h - 1) // th
        indices = [r * across + c for r in range(r0, r1 + 1) for c in range(c0, c1 + 1)]
        if any(grid.counts[i] == 0 for i in indices):
            return None
        out = np.empty(((r1 - r0 + 1) * th, (c1 - c0 + 1) * tw, 3), np.uint8)
        fd = os.open(grid.path or self.path, os.O_RDONLY)
        try:
            for i in indices:
                data = os.pread(fd, grid.counts[i], grid.offsets[i])
                try:
                    tile = grid.decode(data, i, jpegtables=grid.tables)[0]
                except Exception:  # noqa: BLE001 - a damaged tile: OpenSlide reads it and reports
                    return None
                if tile is None or tile.shape[1:] != (th, tw, 3):
                    return None
                r, c = divmod(i, across)
                out[(r - r0) * th : (r - r0 + 1) * th, (c - c0) * tw : (c - c0 + 1) * tw] = tile[0]
        finally:
            os.close(fd)
        ox, oy = x - c0 * tw, y - r0 * th
        return out[oy : oy + h, ox : ox + w]


def _levels(path: str, slide: openslide.OpenSlide) -> list[_Level | None]:
    import tifffile  # imported here: most modules importing this one never read a slide

    aperio = slide.properties.get(openslide.PROPERTY_NAME_VENDOR) == "aperio"
    compressions = (JPEG, *LOSSLESS, APERIO_JP2K_RGB) if aperio else (JPEG, *LOSSLESS)
    levels: list[_Level | None] = []
    with tifffile.TiffFile(path) as tif:
        pages = [p for p in tif.pages if isinstance(p, tifffile.TiffPage) and p.is_tiled]
        for size in slide.level_dimensions:
            same = [p for p in pages if (p.imagewidth, p.imagelength) == tuple(size)]
            page = same[0] if len(same) == 1 else None
            ok = page is not None and (
                page.compression in compressions
                and page.bitspersample == 8
                and page.samplesperpixel == 3
                and page.planarconfig == 1
                and page.imagedepth == 1
                and int(page.photometric) in ((2, 6) if page.compression == JPEG else (2,))  # RGB, YCbCr
            )
            levels.append(
                _Level(
                    page.imagewidth, page.imagelength, page.tilewidth, page.tilelength,
                    tuple(page.dataoffsets), tuple(page.databytecounts), page.jpegtables, page.decode,
                ) if ok else None
            )  # fmt: skip
    return levels


_READERS: weakref.WeakKeyDictionary[openslide.OpenSlide, TileReader | None] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def tile_reader(slide: openslide.OpenSlide) -> TileReader | None:
    """The slide's tile reader (made once per open slide), None when OpenSlide must read it all."""
    with _LOCK:
        if slide in _READERS:
            return _READERS[slide]
    reader = None
    path = slide._filename if isinstance(slide, openslide.OpenSlide) else None  # a wrapper: OpenSlide reads
    if path is not None and slide.properties.get(openslide.PROPERTY_NAME_VENDOR) in DIRECT_VENDORS:
        try:
            if slide.properties.get(openslide.PROPERTY_NAME_VENDOR) == "dicom":
                from giant_assets.slides.dicom_tiles import dicom_levels

                levels = dicom_levels(os.fspath(path), slide)
            else:
                levels = _levels(os.fspath(path), slide)
        except Exception:  # noqa: BLE001 - any parsing trouble: OpenSlide reads this slide
            levels = []
        if any(levels):
            reader = TileReader(os.fspath(path), levels)
    with _LOCK:
        _READERS[slide] = reader
    return reader


def read_direct(
    slide: openslide.OpenSlide, loc: tuple[int, int], level: int, size: tuple[int, int]
) -> np.ndarray | None:
    """``read_region``'s RGB pixels from the tiles when covered (see the module docstring), else None."""
    reader = tile_reader(slide)
    if reader is None:
        return None
    return reader.read(loc, level, size, float(slide.level_downsamples[level]))
