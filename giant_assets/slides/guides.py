"""Guide marks over a slide image, drawn as the released GIANT code draws them.

Four evenly spaced lines per axis, labelled with level-0 coordinates, a border and a corner label:

- line ``i`` (1..4) of an axis sits at ``i/5`` of the image (the float position, which Pillow draws in
  the column or row it truncates to), 1 px wide, pure green;
- its label is the level-0 coordinate ``x0 + int(i/5 * (image_width * ds))`` (``ds`` the long side's
  level-0 pixels per image pixel; the same on y), white text in a black box padded by 3 px: a vertical
  line's label 3 px right of the line and 3 px below the top edge, a horizontal line's 3 px from the
  left edge and its text's height + 6 px above the line;
- a 1 px red border round the image and the box's top-left corner ``(x0, y0)`` in a black box padded by
  4 px at (2, 2), drawn last;
- the font is DejaVu Sans at 2% of the image's short side (at least 8 px).

The released code asks for alpha 180 (lines, border) and 150 (label boxes), but it draws on an RGBA copy
without blending and then drops the alpha channel, so what the model sees is opaque: these colours are
drawn opaque here, pixel for pixel the same image. The lines are drawn over the image (no margin), so
the image keeps its size.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

GUIDE_COLOR = (0, 255, 0)
BORDER_COLOR = (255, 0, 0)
LABEL_INK = (255, 255, 255)
LABEL_BACKGROUND = (0, 0, 0)
N_GUIDES = 4
LABEL_PAD = 3  # around a guide's label
CORNER_PAD = 4  # around the corner label
LABEL_OFFSET = 3  # label text from its line (and from the image edge)
ABOVE_LINE = 6  # a horizontal line's label ends this far above it
CORNER_XY = (2, 2)
FONT_FRACTION = 0.02  # of the image's short side
MIN_FONT_PX = 8
FONT_FILE = "DejaVuSans.ttf"
FONT_DIRS = ("/usr/share/fonts/truetype/dejavu",)  # the released code's path; matplotlib ships a copy too


@dataclass(frozen=True)
class Guide:
    """One guide line: its pixel column (x axis) or row (y axis) in the image, and its level-0 label."""

    pixel: int
    level0: int


@dataclass(frozen=True)
class Guides:
    """The guide lines drawn on an image, per axis."""

    x: tuple[Guide, ...]
    y: tuple[Guide, ...]


def font_px(image_size: tuple[int, int]) -> int:
    """The label font size for an image: 2% of its short side, at least 8 px."""
    return max(int(FONT_FRACTION * min(image_size)), MIN_FONT_PX)


def font_path() -> Path | None:
    """DejaVu Sans: the system's copy, else matplotlib's; None when neither is installed.

    matplotlib's copy is found without importing matplotlib (~0.5 CPU-s in every process that draws
    guides: each run worker running GIANT): its data folder is ``mpl-data`` beside the package."""
    candidates = [Path(d) / FONT_FILE for d in FONT_DIRS]
    spec = importlib.util.find_spec("matplotlib")
    if spec is not None and spec.origin:
        candidates.append(Path(spec.origin).with_name("mpl-data") / "fonts" / "ttf" / FONT_FILE)
    return next((p for p in candidates if p.is_file()), None)


@cache
def label_font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """DejaVu Sans at ``size`` px (Pillow's default font at that size if DejaVu Sans is missing)."""
    path = font_path()
    return ImageFont.truetype(str(path), size) if path else ImageFont.load_default(size=size)


def guide_fractions(n: int = N_GUIDES) -> tuple[float, ...]:
    return tuple(i / (n + 1) for i in range(1, n + 1))


def draw_guides(image: Image.Image, box: tuple[int, int, int, int]) -> tuple[Image.Image, Guides]:
    """A copy of ``image`` (showing level-0 ``box`` = x, y, w, h) with the guide marks drawn over it."""
    out = image.convert("RGB")  # always a new image
    width, height = out.size
    x0, y0, w, h = box
    ds = max(w, h) / max(width, height)  # level-0 pixels per image pixel
    draw = ImageDraw.Draw(out)
    font = label_font(font_px(out.size))
    xs, ys = [], []
    full_w, full_h = width * ds, height * ds  # first, as the official code: the float rounding matches
    for frac in guide_fractions():
        sx, label = frac * width, x0 + int(frac * full_w)
        draw.line([(sx, 0), (sx, height)], fill=GUIDE_COLOR, width=1)
        _label(draw, font, str(label), (sx + LABEL_OFFSET, LABEL_OFFSET), LABEL_PAD)
        xs.append(Guide(int(sx), label))
    for frac in guide_fractions():
        sy, label = frac * height, y0 + int(frac * full_h)
        draw.line([(0, sy), (width, sy)], fill=GUIDE_COLOR, width=1)
        left, top, right, bottom = draw.textbbox((0, 0), str(label), font=font)
        _label(draw, font, str(label), (LABEL_OFFSET, sy - (bottom - top) - ABOVE_LINE), LABEL_PAD)
        ys.append(Guide(int(sy), label))
    draw.rectangle([(0, 0), (width - 1, height - 1)], outline=BORDER_COLOR, width=1)
    _label(draw, font, f"({x0}, {y0})", CORNER_XY, CORNER_PAD)
    return out, Guides(tuple(xs), tuple(ys))


def _label(
    draw: ImageDraw.ImageDraw,
    font: ImageFont.FreeTypeFont | ImageFont.ImageFont,
    text: str,
    xy: tuple[float, float],
    pad: int,
) -> None:
    """White ``text`` at ``xy`` (its top-left) on a black box ``pad`` px larger than its ink."""
    left, top, right, bottom = draw.textbbox(xy, text, font=font)
    draw.rectangle([left - pad, top - pad, right + pad, bottom + pad], fill=LABEL_BACKGROUND)
    draw.text(xy, text, font=font, fill=LABEL_INK)
