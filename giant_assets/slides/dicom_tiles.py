"""The JPEG and JPEG 2000 frame grids of a DICOM-WSI's pyramid levels, for ``slides.tiles``' direct reads.

A level is covered when exactly one instance of the slide's series (in the folder OpenSlide opened) has
the level's size and is a baseline JPEG (1.2.840.10008.1.2.4.50) or a JPEG 2000 (.90 lossless, .91
lossy) of photometric RGB, YBR_ICT or YBR_RCT (any colour transform is inside the codestream, undone by
OpenJPEG as OpenSlide's own decode does: identical pixels, tests/slides/test_formats.py), 8-bit,
3-sample, TILED_FULL volume of one focal plane and one optical path, whose encapsulated pixel data holds
one fragment per frame.
Frame positions come from the Basic Offset Table (or, when it is empty, from the fragment headers);
the pixel data itself is never loaded here.
"""

from __future__ import annotations

import struct
from pathlib import Path

import imagecodecs
import numpy as np
import openslide

from giant_assets.slides.formats import dicom_instances
from giant_assets.slides.tiles import _Level

JPEG_BASELINE = "1.2.840.10008.1.2.4.50"
JPEG_2000 = ("1.2.840.10008.1.2.4.90", "1.2.840.10008.1.2.4.91")
J2K_PHOTOMETRIC = ("RGB", "YBR_ICT", "YBR_RCT")
_PIXEL_DATA_HEADER = bytes.fromhex("e07f10004f420000ffffffff")  # (7FE0,0010) OB, undefined length
_ITEM, _SEQ_END = bytes.fromhex("feff00e0"), bytes.fromhex("feffdde0")


def _decode(data: bytes, index: int, jpegtables: bytes | None = None) -> tuple[np.ndarray]:
    """One JPEG frame as tifffile's tile decoder returns a tile: ((1, h, w, 3) array,)."""
    return (imagecodecs.jpeg8_decode(data)[None],)


def _decode_j2k(data: bytes, index: int, jpegtables: bytes | None = None) -> tuple[np.ndarray]:
    """One JPEG 2000 frame, as ``_decode`` returns a JPEG one."""
    return (imagecodecs.jpeg2k_decode(data)[None],)


def _frames(fp, start: int, n: int) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(offsets, lengths) of the ``n`` frames of encapsulated pixel data starting at ``start``."""
    fp.seek(start)
    if fp.read(12) != _PIXEL_DATA_HEADER:
        return None
    head = fp.read(8)
    if head[:4] != _ITEM:
        return None
    (bot_len,) = struct.unpack("<I", head[4:])
    bot = fp.read(bot_len)
    first = start + 12 + 8 + bot_len  # the first fragment's item header
    offsets, lengths = [], []
    if bot_len == 4 * n:
        rel = struct.unpack(f"<{n}I", bot)
        for r in rel:  # each frame's item header, read to get its length (8 bytes per frame)
            fp.seek(first + r)
            item = fp.read(8)
            if item[:4] != _ITEM:
                return None
            offsets.append(first + r + 8)
            lengths.append(struct.unpack("<I", item[4:])[0])
    elif bot_len == 0:
        pos = first
        while len(offsets) <= n:
            fp.seek(pos)
            item = fp.read(8)
            if item[:4] == _SEQ_END:
                break
            if item[:4] != _ITEM:
                return None
            (length,) = struct.unpack("<I", item[4:])
            offsets.append(pos + 8)
            lengths.append(length)
            pos += 8 + length
        if len(offsets) != n:  # frames split over fragments, or more fragments than frames
            return None
    else:
        return None
    return tuple(offsets), tuple(lengths)


def _level_of(path: Path, series: str) -> tuple[tuple[int, int], _Level | None] | None:
    """(pixel matrix size, its grid or None when not covered) of one instance of ``series``."""
    import pydicom

    with open(path, "rb") as fp:
        ds = pydicom.dcmread(fp, stop_before_pixels=True)
        if str(ds.get("SeriesInstanceUID", "")) != series or "VOLUME" not in list(ds.get("ImageType", [])):
            return None
        size = (int(ds.TotalPixelMatrixColumns), int(ds.TotalPixelMatrixRows))
        tw, th, n = int(ds.Columns), int(ds.Rows), int(ds.get("NumberOfFrames", 1))
        syntax, photometric = (
            str(ds.file_meta.TransferSyntaxUID),
            str(ds.get("PhotometricInterpretation", "")),
        )
        decode = _decode if syntax == JPEG_BASELINE else None
        if syntax in JPEG_2000 and photometric in J2K_PHOTOMETRIC:
            decode = _decode_j2k
        ok = (
            decode is not None
            and int(ds.SamplesPerPixel) == 3
            and int(ds.BitsAllocated) == 8
            and int(ds.get("PlanarConfiguration", 0)) == 0
            and str(ds.get("DimensionOrganizationType", "")) == "TILED_FULL"
            and int(ds.get("TotalPixelMatrixFocalPlanes", 1)) == 1
            and int(ds.get("NumberOfOpticalPaths", 1)) == 1
            and n == -(-size[0] // tw) * -(-size[1] // th)
        )
        frames = _frames(fp, fp.tell(), n) if ok else None
    if frames is None:
        return size, None
    return size, _Level(size[0], size[1], tw, th, frames[0], frames[1], None, decode, str(path))


def dicom_levels(path: str, slide: openslide.OpenSlide) -> list[_Level | None]:
    """The grid of each OpenSlide level of the DICOM-WSI opened through instance ``path`` (None: not
    covered, OpenSlide reads it)."""
    import pydicom

    series = str(pydicom.dcmread(path, stop_before_pixels=True).SeriesInstanceUID)
    by_size: dict[tuple[int, int], list[_Level | None]] = {}
    for instance in dicom_instances(Path(path).parent):
        found = _level_of(instance, series)
        if found is not None:
            by_size.setdefault(found[0], []).append(found[1])
    levels: list[_Level | None] = []
    for size in slide.level_dimensions:
        same = by_size.get(tuple(int(v) for v in size), [])
        levels.append(same[0] if len(same) == 1 else None)
    return levels
