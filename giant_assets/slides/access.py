"""Read what an agent asks to see from a whole-slide image: info, guided thumbnails, crops, encoding.

Reads always go through the pyramid level that just covers the requested output size, and large
reads are done in row strips, so a whole level-0 slide is never held in memory.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openslide
from PIL import Image

from giant_assets.slides.formats import SlideError as SlideError  # re-exported: callers catch it here
from giant_assets.slides.formats import openslide_target
from giant_assets.slides.guides import Guides, draw_guides
from giant_assets.slides.tiles import read_direct

MAX_ASPECT = 50.0  # a crop whose clipped box is longer than this many times its width is refused
MAX_READ_PIXELS = 1 << 24  # larger reads are done in row strips
_FORMATS = {"JPEG": "image/jpeg", "PNG": "image/png"}
JPEG_QUALITY = 75  # Pillow's default, which the released GIANT code encodes with (it names none)


class InvalidRegion(ValueError):
    """A requested region cannot be cropped; the message is written to be shown to the model."""


@dataclass(frozen=True)
class CropResult:
    """A crop as sent to the model, with what was actually read to make it."""

    image: Image.Image
    level: int  # pyramid level read
    downsample: float  # that level's downsample
    box: tuple[int, int, int, int]  # level-0 [x, y, w, h] after clipping to the slide
    requested: tuple[float, float, float, float]  # the box as asked for
    clipped: bool  # True when the requested box reached outside the slide
    read_size: tuple[int, int]  # pixels read at ``level``


@dataclass(frozen=True)
class Thumbnail:
    """The whole slide, scaled, with optional guide lines drawn over it (``offset`` is then (0, 0))."""

    image: Image.Image
    level: int
    content_size: tuple[int, int]  # size of the slide area inside ``image``
    offset: tuple[int, int]  # top-left of the slide area inside ``image``
    scale: tuple[float, float]  # thumbnail px per level-0 px, (x, y)
    guides: Guides | None

    def to_level0(self, px: float, py: float) -> tuple[float, float]:
        """Image pixel -> level-0 coordinate."""
        return (px - self.offset[0]) / self.scale[0], (py - self.offset[1]) / self.scale[1]

    def to_image(self, x: float, y: float) -> tuple[float, float]:
        """Level-0 coordinate -> image pixel."""
        return self.offset[0] + x * self.scale[0], self.offset[1] + y * self.scale[1]


def open_slide(path: str | Path) -> openslide.OpenSlide:
    """Open a WSI with OpenSlide: a slide file, or a DICOM-WSI folder or instance (``slides.formats``);
    a missing, unreadable or unsupported slide raises SlideError naming it."""
    path = Path(path)
    if not path.exists():
        raise SlideError(f"slide file not found: {path}")
    target = openslide_target(path)
    try:
        return openslide.OpenSlide(target)
    except openslide.OpenSlideUnsupportedFormatError as exc:
        raise SlideError(f"not a slide format OpenSlide can read: {path}") from exc
    except (openslide.OpenSlideError, OSError) as exc:
        raise SlideError(f"cannot open slide {path}: {exc}") from exc


def slide_info(slide: openslide.OpenSlide) -> dict[str, Any]:
    """Level-0 size, pyramid levels, microns per pixel (when present) and vendor."""
    width, height = slide.dimensions
    info: dict[str, Any] = {
        "width": int(width),
        "height": int(height),
        "level_count": int(slide.level_count),
        "level_downsamples": [float(d) for d in slide.level_downsamples],
        "level_dimensions": [[int(w), int(h)] for w, h in slide.level_dimensions],
        "vendor": slide.properties.get(openslide.PROPERTY_NAME_VENDOR),
    }
    for key, prop in (("mpp_x", openslide.PROPERTY_NAME_MPP_X), ("mpp_y", openslide.PROPERTY_NAME_MPP_Y)):
        value = slide.properties.get(prop)
        if value is not None:
            info[key] = float(value)
    return info


def choose_level(downsamples: Sequence[float], box_long_side: float, target_long_side: int) -> int:
    """The level with the largest downsample that still gives at least ``target_long_side`` pixels.

    Falls back to level 0 when even level 0 gives fewer pixels than the target.
    """
    best, best_ds = 0, 0.0
    for level, ds in enumerate(downsamples):
        # 0.1% tolerance: real pyramids report downsamples like 4.00004 for 4
        if box_long_side / ds >= target_long_side * (1 - 1e-3) and ds > best_ds:
            best, best_ds = level, ds
    return best


def validate_box(
    box_xywh: Sequence[float], width: int, height: int
) -> tuple[tuple[int, int, int, int], bool]:
    """Clip a level-0 [x, y, w, h] box to the slide; return (clipped box, whether it was clipped).

    Raises InvalidRegion for anything that is not four finite numbers, a zero or negative size,
    a box entirely outside the slide, or an absurdly thin box.
    """
    bounds = f"the slide spans x 0..{width}, y 0..{height} (level-0 pixels)"
    try:
        values = [float(v) for v in box_xywh]
    except (TypeError, ValueError):
        raise InvalidRegion(f"region {list(box_xywh)!r} must be four numbers [x, y, w, h]") from None
    if len(values) != 4 or not all(math.isfinite(v) for v in values):
        raise InvalidRegion(f"region {values!r} must be four finite numbers [x, y, w, h]")
    x, y, w, h = values
    if w <= 0 or h <= 0:
        raise InvalidRegion(f"region [{x:g}, {y:g}, {w:g}, {h:g}] has zero or negative width/height")
    x0, y0 = max(0, round(x)), max(0, round(y))
    x1, y1 = min(width, round(x + w)), min(height, round(y + h))
    if x1 - x0 < 1 or y1 - y0 < 1:
        raise InvalidRegion(f"region [{x:g}, {y:g}, {w:g}, {h:g}] lies outside the slide; {bounds}")
    cw, ch = x1 - x0, y1 - y0
    if max(cw, ch) / min(cw, ch) > MAX_ASPECT:
        raise InvalidRegion(
            f"region [{x0}, {y0}, {cw}, {ch}] (after clipping) is {max(cw, ch) / min(cw, ch):.0f}x longer "
            f"than wide; keep the aspect ratio under {MAX_ASPECT:g}"
        )
    clipped = (x0, y0, x1, y1) != (round(x), round(y), round(x + w), round(y + h))
    return (x0, y0, cw, ch), clipped


def output_size(w: int, h: int, target_long_side: int) -> tuple[int, int]:
    """Size of a w x h region scaled so its long side is ``target_long_side``."""
    s = target_long_side / max(w, h)
    return max(1, round(w * s)), max(1, round(h * s))


def crop(
    slide: openslide.OpenSlide,
    box_xywh: Sequence[float],
    target_long_side: int = 1024,
    max_read_pixels: int = MAX_READ_PIXELS,
) -> CropResult:
    """Crop a level-0 box, read at the coarsest level that still gives ``target_long_side`` pixels."""
    width, height = slide.dimensions
    box, clipped = validate_box(box_xywh, width, height)
    x, y, w, h = box
    level = choose_level(slide.level_downsamples, max(w, h), target_long_side)
    image, read_size = read_scaled(slide, level, box, output_size(w, h, target_long_side), max_read_pixels)
    return CropResult(
        image=image,
        level=level,
        downsample=float(slide.level_downsamples[level]),
        box=box,
        requested=tuple(float(v) for v in box_xywh),  # type: ignore[arg-type]
        clipped=clipped,
        read_size=read_size,
    )


def thumbnail(
    slide: openslide.OpenSlide,
    long_side: int = 1024,
    guides: bool = True,
    max_read_pixels: int = MAX_READ_PIXELS,
) -> Thumbnail:
    """The whole slide with its long side ``long_side``; ``guides`` draws labelled guide lines over it."""
    width, height = slide.dimensions
    level = choose_level(slide.level_downsamples, max(width, height), long_side)
    size = output_size(width, height, long_side)
    content, _ = read_scaled(slide, level, (0, 0, width, height), size, max_read_pixels)
    scale = (size[0] / width, size[1] / height)
    if not guides:
        return Thumbnail(content, level, size, (0, 0), scale, None)
    image, drawn = draw_guides(content, (0, 0, width, height))
    return Thumbnail(image, level, size, (0, 0), scale, drawn)


def encode_image(img: Image.Image, fmt: str = "JPEG", quality: int = JPEG_QUALITY) -> str:
    """Base64 (ASCII) of the image encoded as JPEG (at ``quality``, 1-95) or PNG."""
    fmt = fmt.upper()
    if fmt not in _FORMATS:
        raise ValueError(f"image format {fmt!r} is not supported; use one of {sorted(_FORMATS)}")
    buf = io.BytesIO()
    img.convert("RGB").save(buf, format=fmt, **({"quality": quality} if fmt == "JPEG" else {}))
    return base64.b64encode(buf.getvalue()).decode("ascii")


def media_type(fmt: str) -> str:
    """MIME type of an ``encode_image`` format."""
    return _FORMATS[fmt.upper()]


def read_size(box: tuple[int, int, int, int], downsample: float) -> tuple[int, int]:
    """Pixels of a level with ``downsample`` that level-0 ``box`` covers: ``round(w / downsample)`` x
    ``round(h / downsample)`` (at least 1), as the official code reads; not clipped to the level."""
    return max(1, round(box[2] / downsample)), max(1, round(box[3] / downsample))


def read_scaled(
    slide: openslide.OpenSlide,
    level: int,
    box: tuple[int, int, int, int],
    out_size: tuple[int, int],
    max_read_pixels: int,
) -> tuple[Image.Image, tuple[int, int]]:
    """Read a level-0 box at ``level`` and resize it to ``out_size``; large reads go strip by strip."""
    x, y, _, _ = box
    ds = float(slide.level_downsamples[level])
    read_w, read_h = read_size(box, ds)
    out_w, out_h = out_size
    if read_w * read_h <= max_read_pixels:
        image = _read_rgb(slide, (x, y), level, (read_w, read_h))
        if image.size != out_size:
            image = image.resize(out_size, Image.Resampling.LANCZOS)
        return image, (read_w, read_h)
    # Strip i covers output rows [i*k, (i+1)*k) and the level rows that map onto them.
    rows_per_out = read_h / out_h
    k = max(1, int(max_read_pixels / read_w / rows_per_out))
    out = Image.new("RGB", out_size)
    for o0 in range(0, out_h, k):
        o1 = min(out_h, o0 + k)
        r0, r1 = round(o0 * rows_per_out), max(round(o0 * rows_per_out) + 1, round(o1 * rows_per_out))
        strip = _read_rgb(slide, (x, y + round(r0 * ds)), level, (read_w, r1 - r0))
        out.paste(strip.resize((out_w, o1 - o0), Image.Resampling.LANCZOS), (0, o0))
    return out, (read_w, read_h)


def _read_rgb(
    slide: openslide.OpenSlide, loc: tuple[int, int], level: int, size: tuple[int, int]
) -> Image.Image:
    """``read_region`` as RGB, as the official code converts it: transparent areas (past the level's
    edge, a sparse slide's missing tiles) become black; read from the JPEG tiles directly where that
    gives the same pixels (``slides.tiles``)."""
    direct = read_direct(slide, loc, level, size)
    if direct is not None:
        return Image.fromarray(direct)
    return slide.read_region(loc, level, size).convert("RGB")
