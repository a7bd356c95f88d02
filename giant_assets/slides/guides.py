"""Guide lines over a slide image: four evenly spaced lines per axis, labelled with level-0 coordinates.

The lines are drawn over the image itself (no margin), so the image keeps its size: the long side sent to
a model is exactly the size that was asked for. Line ``i`` (1..4) of an axis sits at ``i/5`` of the shown
box, so the five bands between the edges and the lines are equal.
"""

from __future__ import annotations

from dataclasses import dataclass

from PIL import Image, ImageDraw, ImageFont

GUIDE_COLOR = (0, 255, 0)  # pure green: never a stain colour, easy to tell from tissue
LABEL_INK = (0, 0, 0)
LABEL_BACKGROUND = (255, 255, 255)
N_GUIDES = 4
LABEL_PAD = 2


@dataclass(frozen=True)
class Guide:
    """One guide line: its pixel column (x axis) or row (y axis) in the image, and its level-0 value."""

    pixel: int
    level0: int


@dataclass(frozen=True)
class Guides:
    """The guide lines drawn on an image, per axis."""

    x: tuple[Guide, ...]
    y: tuple[Guide, ...]


def line_width(image_long_side: int) -> int:
    """Guide line width in pixels: about the image's long side / 600, at least 1 (2 px at 1000 px)."""
    return max(1, round(image_long_side / 600))


def guide_positions(start: int, span: int, image_span: int, n: int = N_GUIDES) -> tuple[Guide, ...]:
    """``n`` evenly spaced guides over level-0 ``[start, start + span)`` shown in ``image_span`` pixels."""
    return tuple(
        Guide(
            pixel=min(image_span - 1, round(i * image_span / (n + 1))),
            level0=start + round(i * span / (n + 1)),
        )
        for i in range(1, n + 1)
    )


def label_font(image_long_side: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """The label font, scaled with the image (about 2% of its long side, at least 10 px)."""
    return ImageFont.load_default(size=max(10, round(image_long_side / 50)))


def draw_guides(image: Image.Image, box: tuple[int, int, int, int]) -> tuple[Image.Image, Guides]:
    """A copy of ``image`` (showing level-0 ``box`` = x, y, w, h) with labelled guide lines drawn over it."""
    out = image.convert("RGB")  # always a new image
    width, height = out.size
    x, y, w, h = box
    guides = Guides(guide_positions(x, w, width), guide_positions(y, h, height))
    lw = line_width(max(width, height))
    draw = ImageDraw.Draw(out)
    for g in guides.x:
        left = max(0, min(width - lw, g.pixel - lw // 2))
        draw.rectangle([left, 0, left + lw - 1, height - 1], fill=GUIDE_COLOR)
    for g in guides.y:
        top = max(0, min(height - lw, g.pixel - lw // 2))
        draw.rectangle([0, top, width - 1, top + lw - 1], fill=GUIDE_COLOR)
    font = label_font(max(width, height))
    for g in guides.x:  # x labels along the top edge, centred on their line
        _label(draw, font, str(g.level0), (g.pixel, LABEL_PAD), "mt", out.size)
    for g in guides.y:  # y labels along the left edge, centred on their line
        _label(draw, font, str(g.level0), (LABEL_PAD, g.pixel), "lm", out.size)
    return out, guides


def _label(
    draw: ImageDraw.ImageDraw,
    font: ImageFont.FreeTypeFont | ImageFont.ImageFont,
    text: str,
    anchor_xy: tuple[int, int],
    anchor: str,
    size: tuple[int, int],
) -> None:
    """Black text on a white box at ``anchor_xy``, shifted back inside the image if it would overflow."""
    left, top, right, bottom = draw.textbbox(anchor_xy, text, font=font, anchor=anchor)
    dx = max(0, LABEL_PAD - left) - max(0, right + LABEL_PAD - size[0])
    dy = max(0, LABEL_PAD - top) - max(0, bottom + LABEL_PAD - size[1])
    draw.rectangle(
        [
            left + dx - LABEL_PAD,
            top + dy - LABEL_PAD,
            right + dx + LABEL_PAD - 1,
            bottom + dy + LABEL_PAD - 1,
        ],
        fill=LABEL_BACKGROUND,
    )
    draw.text((anchor_xy[0] + dx, anchor_xy[1] + dy), text, fill=LABEL_INK, font=font, anchor=anchor)
