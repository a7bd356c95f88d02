"""Anthropic's per-request image limits, kept where they depend on the run (``api_contracts`` has them).

Too many images in one request (over ``MAX_IMAGES``, or over ``MANY_IMAGES`` while one of them is over
``MANY_IMAGES_PX``): the oldest images leave the request, each replaced by a one-line note, except the
first (the slide's overview), until the request fits. An image no request may hold (over
``MAX_IMAGE_PX`` on a side, or over ``MAX_IMAGE_B64`` bytes of base64) is refused before sending.
"""

from __future__ import annotations

import base64
import binascii
import io
from collections.abc import Sequence
from dataclasses import replace

from PIL import Image, UnidentifiedImageError

from giant_assets.agents.providers.errors import RequestNotSent
from giant_assets.agents.providers.messages import ImagePart, Message, TextPart
from giant_assets.experiments import api_contracts as limits

HEADER_B64 = 65_536  # base64 characters decoded to read an image's size (its header is near the start)


def image_px(part: ImagePart) -> tuple[int, int]:
    """(width, height) of an image part, from its header; (0, 0) when it cannot be read."""
    for chars in (HEADER_B64, len(part.data_b64)):
        try:
            with Image.open(io.BytesIO(base64.b64decode(part.data_b64[:chars]))) as img:
                return img.size
        except (binascii.Error, ValueError, UnidentifiedImageError, OSError):
            if chars >= len(part.data_b64):
                break
    return (0, 0)


def fit_anthropic_images(
    messages: Sequence[Message], where: str
) -> tuple[Sequence[Message], tuple[str, ...]]:
    """``messages`` within Anthropic's image limits, and a note when images had to leave the request."""
    images = [
        (m, k) for m, msg in enumerate(messages) for k, p in enumerate(msg.parts) if isinstance(p, ImagePart)
    ]
    sizes = {}
    for number, (m, k) in enumerate(images, 1):
        part = messages[m].parts[k]
        size = image_px(part)
        sizes[(m, k)] = max(size)
        if len(part.data_b64) > limits.MAX_IMAGE_B64:
            raise RequestNotSent(
                f"{where}: image {number} ({part.label}) is {len(part.data_b64):,} bytes of base64, above "
                f"Anthropic's {limits.MAX_IMAGE_B64:,}; lower image_size / thumbnail_size"
            )
        if max(size) > limits.MAX_IMAGE_PX:
            raise RequestNotSent(
                f"{where}: image {number} ({part.label}) is {size[0]} x {size[1]} px, above Anthropic's "
                f"{limits.MAX_IMAGE_PX} px per side; lower image_size / thumbnail_size"
            )
    keep = len(images)
    if keep > limits.MAX_IMAGES:
        keep = limits.MAX_IMAGES
    if keep > limits.MANY_IMAGES and max(sizes.values()) > limits.MANY_IMAGES_PX:
        keep = limits.MANY_IMAGES
    if keep == len(images):
        return messages, ()
    drop = set(images[1 : 1 + len(images) - keep])  # the oldest, never the first (the overview)
    out = [
        replace(msg, parts=tuple(
            TextPart(f"[{p.label}: image removed from the context]") if (m, k) in drop else p
            for k, p in enumerate(msg.parts)
        )) if any(m == dm for dm, _ in drop) else msg
        for m, msg in enumerate(messages)
    ]  # fmt: skip
    note = (
        f"{len(drop)} of {len(images)} images left out of the request (Anthropic: at most "
        f"{limits.MAX_IMAGES} per request, {limits.MANY_IMAGES} when one is over {limits.MANY_IMAGES_PX} px)"
    )
    return out, (note,)
