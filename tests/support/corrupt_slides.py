"""Damage real generated slides the way a bad disk or download does: tiles whose bytes do not decode."""

from __future__ import annotations

from pathlib import Path

import tifffile


def corrupt_smallest_level_tiles(path: Path) -> int:
    """Overwrite the first 16 bytes of every tile of the last (smallest) TIFF page; return tiles hit.

    The file still opens (IFDs and tags are intact); only pixel decoding fails.
    """
    with tifffile.TiffFile(path) as tif:
        page = tif.pages[len(tif.pages) - 1]
        spans = list(zip(page.dataoffsets, page.databytecounts, strict=True))
    with open(path, "r+b") as fh:
        for offset, count in spans:
            fh.seek(offset)
            fh.write(b"\x00" * min(16, count))
    return len(spans)
