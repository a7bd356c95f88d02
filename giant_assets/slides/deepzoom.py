"""Deep Zoom tiles read from a slide itself, for OpenSeadragon: the ``.dzi`` descriptor and JPEG tiles.

Any slide the platform opens (``access.open_slide``: OpenSlide formats and DICOM-WSI folders alike) goes
through ``openslide.deepzoom.DeepZoomGenerator``, one tile path for every format. Bounds are not limited
to the scanned area, so the image's pixel coordinates are the slide's level-0 coordinates: an overlay
placed at a level-0 box needs no offset.
"""

from __future__ import annotations

import io
import threading
from dataclasses import dataclass, field
from pathlib import Path

from openslide.deepzoom import DeepZoomGenerator

from giant_assets.slides.access import open_slide

TILE_SIZE = 254  # OpenSeadragon's and OpenSlide's default: 254 + 2 x 1 overlap = 256-pixel reads
OVERLAP = 1
FORMAT = "jpeg"
QUALITY = 75


class NoSuchTile(LookupError):
    """A level, column or row outside the slide's Deep Zoom pyramid."""


class SlideClosed(RuntimeError):
    """The slide was closed (evicted from a cache) before this read began."""


@dataclass
class DeepZoomSlide:
    """One open slide and its Deep Zoom pyramid; ``close`` releases the file once the reads under way
    are done (closing an OpenSlide handle in the middle of a read crashes the process)."""

    path: str
    _slide: object
    _dz: DeepZoomGenerator
    _readers: int = 0
    _closed: bool = False
    _cond: threading.Condition = field(default_factory=threading.Condition)

    @classmethod
    def open(cls, path: str | Path) -> DeepZoomSlide:
        """Open slide ``path`` (SlideError when it cannot be read)."""
        slide = open_slide(path)
        dz = DeepZoomGenerator(slide, tile_size=TILE_SIZE, overlap=OVERLAP, limit_bounds=False)
        return cls(str(path), slide, dz)

    @property
    def levels(self) -> int:
        return int(self._dz.level_count)

    @property
    def size(self) -> tuple[int, int]:
        """Level-0 width and height (the Deep Zoom image's size)."""
        w, h = self._dz.level_dimensions[-1]
        return int(w), int(h)

    def descriptor(self) -> bytes:
        """The ``.dzi`` XML: image size, tile size, overlap and tile format."""
        return self._dz.get_dzi(FORMAT).encode("utf-8")

    def tile(self, level: int, col: int, row: int) -> bytes:
        """Tile (``col``, ``row``) of Deep Zoom ``level`` as JPEG; NoSuchTile when outside the pyramid."""
        if not 0 <= level < self.levels:
            raise NoSuchTile(f"level {level} is not in 0..{self.levels - 1}")
        cols, rows = self._dz.level_tiles[level]
        if not (0 <= col < cols and 0 <= row < rows):
            raise NoSuchTile(f"tile {col}_{row} is not in level {level}'s {cols} x {rows} tiles")
        with self._cond:
            if self._closed:
                raise SlideClosed(self.path)
            self._readers += 1
        try:
            image = self._dz.get_tile(level, (col, row))  # OpenSlide reads are thread-safe
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()
        buffer = io.BytesIO()
        image.convert("RGB").save(buffer, "JPEG", quality=QUALITY)
        return buffer.getvalue()

    def close(self) -> None:
        """Refuse new reads, wait for those under way, then close the file."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.wait_for(lambda: self._readers == 0)
        self._slide.close()  # type: ignore[attr-defined]
