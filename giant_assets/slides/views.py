"""What a model is shown of a slide: the whole slide or one region, at a fixed long side, with guides.

The rules follow the released GIANT protocol:

- the image's long side (guides and labels drawn over it, no margin) is exactly ``long_side``, except
  that a region smaller than ``long_side`` at level 0 is shown at its native size (never upsampled);
- the pyramid level is the one OpenSlide deems best for ``needed downsample x 0.85``, one level finer if
  that read would come out smaller than the target; the read covers ``round(w / downsample)`` x
  ``round(h / downsample)`` pixels of that level, as the official code reads (areas past the level's
  edge or without tissue tiles come out black, as its ``convert("RGB")`` makes them), and is then only
  ever downscaled (Lanczos) to ``round(read x long_side / long side of the read)``;
- only the region is read, at the chosen level (large reads in row strips), never a whole level 0;
- four evenly spaced guide lines per axis, labelled with level-0 coordinates (see ``guides``).

``image_read="fast"`` (an experiment field, not the protocol) reads one pyramid level coarser than the
above (when there is one) and resizes that read to the exact path's output size, with the same Lanczos,
guides and encoding: about a quarter of the pixels read, slightly softer images (docs/perf.md).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

import openslide
from PIL import Image

from giant_assets.slides.access import (
    MAX_READ_PIXELS,
    InvalidRegion,
    output_size,
    read_scaled,
    read_size,
    validate_box,
)
from giant_assets.slides.guides import Guides, draw_guides

IMAGE_READS = ("exact", "fast")
LEVEL_MARGIN = 0.85  # ask OpenSlide for a level a little finer than the exact downsample
THUMBNAIL_READER_MAX = 1024  # the released thumbnail baseline uses get_thumbnail up to this size


@dataclass(frozen=True)
class SlideView:
    """An image of a level-0 box of a slide, as sent to a model."""

    image: Image.Image  # RGB
    box: tuple[int, int, int, int]  # level-0 (x, y, w, h) actually shown (after clipping)
    level: int  # pyramid level read
    downsample: float  # that level's downsample
    clipped: bool  # the requested box reached outside the slide
    read_size: tuple[int, int] = (0, 0)  # pixels read at ``level``
    guides: Guides | None = None  # the guide lines drawn, None when drawn without guides

    @property
    def scale(self) -> float:
        """Image pixels per level-0 pixel (the same on both axes up to rounding)."""
        return self.image.size[0] / self.box[2]

    def to_level0(self, px: float, py: float) -> tuple[float, float]:
        """Image pixel -> level-0 coordinate."""
        x, y, w, h = self.box
        return x + px * w / self.image.size[0], y + py * h / self.image.size[1]


def choose_level(slide: openslide.OpenSlide, box: tuple[int, int, int, int], long_side: int) -> int:
    """The pyramid level to read ``box`` (level-0 x, y, w, h) from for an image of ``long_side``."""
    needed = max(box[2], box[3]) / long_side
    level = int(slide.get_best_level_for_downsample(needed * LEVEL_MARGIN))
    if level > 0 and max(level_read_size(slide, level, box)) < long_side:
        level -= 1
    return level


def level_read_size(
    slide: openslide.OpenSlide, level: int, box: tuple[int, int, int, int]
) -> tuple[int, int]:
    """Pixels a read of level-0 ``box`` at ``level`` covers: ``round(w / downsample)``, as officially."""
    return read_size(box, float(slide.level_downsamples[level]))


def overview(
    slide: openslide.OpenSlide,
    long_side: int,
    guides: bool = True,
    max_read_pixels: int = MAX_READ_PIXELS,
    image_read: str = "exact",
) -> SlideView:
    """The whole slide with its long side ``long_side`` (native size if the slide is smaller)."""
    width, height = slide.dimensions
    box = (0, 0, int(width), int(height))
    return _view(slide, box, False, long_side, guides, max_read_pixels, image_read)


def thumbnail_view(
    slide: openslide.OpenSlide, long_side: int, guides: bool = False, max_read_pixels: int = MAX_READ_PIXELS
) -> SlideView:
    """The thumbnail baseline's image, as the released runs made it: OpenSlide's ``get_thumbnail`` in a
    ``long_side`` square up to ``THUMBNAIL_READER_MAX`` px, the overview reader above it.

    ``get_thumbnail`` reads a whole pyramid level; when that level would exceed ``max_read_pixels``
    (a slide without a coarse enough level) the overview reader makes the image instead, strip by strip.
    """
    width, height = (int(v) for v in slide.dimensions)
    if long_side > THUMBNAIL_READER_MAX:
        return overview(slide, long_side, guides, max_read_pixels)
    level = int(slide.get_best_level_for_downsample(max(width / long_side, height / long_side)))
    level_w, level_h = (int(v) for v in slide.level_dimensions[level])
    if level_w * level_h > max_read_pixels:
        return overview(slide, long_side, guides, max_read_pixels)
    image = slide.get_thumbnail((long_side, long_side)).convert("RGB")
    box = (0, 0, width, height)
    drawn = None
    if guides:
        image, drawn = draw_guides(image, box)
    return SlideView(
        image, box, level, float(slide.level_downsamples[level]), False, (level_w, level_h), drawn
    )


def region(
    slide: openslide.OpenSlide,
    box: Sequence[object],
    long_side: int,
    guides: bool = True,
    max_read_pixels: int = MAX_READ_PIXELS,
    image_read: str = "exact",
) -> SlideView:
    """The level-0 ``box`` (x, y, w, h integers) with its long side ``long_side``; see the module docstring.

    A box partly outside the slide is clipped (``clipped`` is set); non-integers, a non-positive size, a
    box entirely outside the slide or an absurdly thin one raise ``InvalidRegion`` with the reason.
    """
    values = _integers(box)
    width, height = slide.dimensions
    shown, clipped = validate_box(values, int(width), int(height))
    return _view(slide, shown, clipped, long_side, guides, max_read_pixels, image_read)


def _integers(box: Sequence[object]) -> list[int]:
    """The box as four ints; floats are accepted only when integral (100.0), bools and text never."""
    try:
        values = list(box)
    except TypeError:
        raise InvalidRegion(f"region {box!r} must be four integers [x, y, w, h]") from None
    if len(values) != 4:
        raise InvalidRegion(f"region {values!r} must be four integers [x, y, w, h], got {len(values)} values")
    out: list[int] = []
    for name, v in zip("xywh", values, strict=True):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise InvalidRegion(f"region {values!r}: {name}={v!r} is not an integer")
        if not isinstance(v, numbers.Integral) and not (math.isfinite(float(v)) and float(v).is_integer()):
            raise InvalidRegion(f"region {values!r}: {name}={v!r} is not an integer (whole level-0 pixels)")
        out.append(int(v))
    return out


def _view(
    slide: openslide.OpenSlide,
    box: tuple[int, int, int, int],
    clipped: bool,
    long_side: int,
    guides: bool,
    max_read_pixels: int,
    image_read: str = "exact",
) -> SlideView:
    if long_side < 1:
        raise ValueError(f"long_side must be a positive number of pixels, got {long_side}")
    if image_read not in IMAGE_READS:
        raise ValueError(f"image_read must be one of {IMAGE_READS}, got {image_read!r}")
    level = choose_level(slide, box, long_side)
    read = level_read_size(slide, level, box)
    # only ever downscale: the read scaled to the target, unless it is no larger (then the read as is)
    out = output_size(read[0], read[1], long_side) if max(read) > long_side else read
    if image_read == "fast" and level + 1 < slide.level_count:
        level += 1  # the same output size from a coarser read
    image, read = read_scaled(slide, level, box, out, max_read_pixels)
    drawn = None
    if guides:
        image, drawn = draw_guides(image, box)
    return SlideView(image, box, level, float(slide.level_downsamples[level]), clipped, read, drawn)
