"""The scripted model's path review: two crops (the lesion, then the slide's top-left quarter), then the
review JSON of five regions, two of them exactly the crops it viewed, one overlapping the first, two it
never viewed; deterministic, so tests can recompute every number from the requests."""

from __future__ import annotations

from typing import Any

from giant_assets.demo.scripted.recorded import RecordedRequest
from giant_assets.demo.scripted.replies import TOOL_NAME, Reply, crop_reply

Box = tuple[int, int, int, int]
REVIEW_MARK = '"region_number"'  # in the review request (built-in and official), in no benchmark question


def is_review_request(first_user_text: str) -> bool:
    return REVIEW_MARK in first_user_text


def zooms(request: RecordedRequest) -> list[Box]:
    """The slide_zoom boxes the conversation asked for so far, in order."""
    out = []
    for turn in request.turns:
        for name, args in turn.tool_calls:
            if name == TOOL_NAME and isinstance(args, dict):
                out.append(tuple(int(args[k]) for k in ("x0", "y0", "w", "h")))
    return out  # type: ignore[return-value]


def reported_regions(viewed: list[Box], size: tuple[int, int]) -> list[Box]:
    """The five regions the review reports, from the boxes viewed and the slide's level-0 size."""
    width, height = size
    first = viewed[0] if viewed else (0, 0, width // 2, height // 2)
    second = viewed[1] if len(viewed) > 1 else first
    x, y, w, h = first
    return [
        first,
        second,
        (x + w // 2, y, w, h),  # half of it overlaps the first crop
        (width // 2, height // 2, width // 2, height // 2),  # the bottom-right quarter, never viewed
        (x + w // 4, y + h // 4, max(1, w // 2), max(1, h // 2)),  # the first crop's centre
    ]


def review_reply(request: RecordedRequest, lesion: Box | None, size: tuple[int, int] | None) -> Reply:
    """Crop the lesion, then the top-left quarter, then report (``size``: the slide's, from the prompt)."""
    width, height = size or (1000, 1000)
    if request.assistant_turns == 0:
        box = lesion or (width // 4, height // 4, width // 2, height // 2)
        return crop_reply(*box, prose="The dark area first.")
    if request.assistant_turns == 1:
        return crop_reply(0, 0, width // 2, height // 2, prose="Now the top-left quarter.")
    regions = reported_regions(zooms(request), (width, height))
    found = lesion is not None
    answer: dict[str, Any] = {
        "regions": [
            {
                "region_number": n,
                "bbox": {"x": x, "y": y, "width": w, "height": h},
                "why_zoomed": "the dark, dense area" if n in (1, 3, 5) else "a look at the background",
                "observations": "crowded dark cells" if n in (1, 3, 5) else "pale tissue",
                "diagnostic_relevance": "supports the diagnosis" if n in (1, 3, 5) else "rules out spread",
            }
            for n, (x, y, w, h) in enumerate(regions, start=1)
        ],
        "answer": {
            "organ_type": "synthetic tissue",
            "diagnosis": "carcinoma" if found else "normal",
            "confidence": "medium",
            "key_findings": "one dense dark lesion" if found else "no lesion seen",
        },
    }
    return Reply("Review of the regions examined.", answer=answer, reasoning="enough seen")
