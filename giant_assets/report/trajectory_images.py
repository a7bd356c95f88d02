"""Pictures of where an agent looked: an overview (thumbnail + numbered viewed boxes + reference regions)
and the crops themselves, re-read from the slide at the recorded boxes, as PNG files beside the results.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
from PIL import Image, ImageDraw

from giant_assets.geometry.roi import Region, regions_from_frame
from giant_assets.slides.access import InvalidRegion, SlideError, crop, open_slide, thumbnail

VIEWED = (0, 160, 255)
REFERENCE = (40, 200, 40)
OVERVIEW_SIZE = 768
CROP_SIZE = 384
PREVIEW_SIZE = 320  # long side of the pictures embedded in asset metadata (a few kB each)


def _viewed_boxes(trajectory_json: str) -> list[tuple[int, list[int]]]:
    """(step index, [x, y, w, h]) of every crop step that named a valid box."""
    steps = json.loads(trajectory_json or "[]")
    return [(s["index"], s["box"]) for s in steps if s.get("action") == "crop" and s.get("box")]


def write_run_images(
    wsi_path: str, trajectory_json: str, out_dir: Path, references: Iterable[Region] = ()
) -> Path | None:
    """Write ``overview.png`` and ``step<i>.png`` crops of one run into ``out_dir``; the overview's path.

    Returns None when the run viewed nothing. Reads only the thumbnail level and each crop's level.
    """
    viewed = _viewed_boxes(trajectory_json)
    if not viewed:
        return None
    out_dir.mkdir(parents=True, exist_ok=True)
    slide = open_slide(wsi_path)
    try:
        th = thumbnail(slide, OVERVIEW_SIZE, guides=False)
        image = th.image.convert("RGB")
        draw = ImageDraw.Draw(image)
        (ox, oy), (sx, sy) = th.offset, th.scale

        def to_px(x: float, y: float) -> tuple[float, float]:
            return ox + x * sx, oy + y * sy

        for region in references:
            minx, miny, maxx, maxy = region.geometry().bounds
            draw.rectangle([*to_px(minx, miny), *to_px(maxx, maxy)], outline=REFERENCE, width=3)
        for number, (index, (x, y, w, h)) in enumerate(viewed, start=1):
            draw.rectangle([*to_px(x, y), *to_px(x + w, y + h)], outline=VIEWED, width=2)
            px, py = to_px(x, y)
            draw.text((px + 4, py + 3), str(number), fill=VIEWED)
            try:
                crop(slide, [x, y, w, h], CROP_SIZE).image.save(out_dir / f"step{index}.png")
            except InvalidRegion:
                continue  # the model was told the region was invalid; nothing was shown
        overview = out_dir / "overview.png"
        image.save(overview)
        return overview
    finally:
        slide.close()


def write_trajectory_images(
    runs: pd.DataFrame,
    items: pd.DataFrame,
    root: Path,
    regions: pd.DataFrame | None = None,
    max_runs: int = 50,
) -> list[Path]:
    """Images of up to ``max_runs`` runs under ``root/<benchmark>/<benchmark_id>/run<k>/``; overview paths.

    ``runs`` are prediction rows (trajectory_json), ``items`` give each item's resolved ``wsi_path``,
    ``regions`` (reference regions table) are drawn in green when given. A slide that cannot be read
    is skipped: pictures never fail an evaluation.
    """
    paths = {(r.benchmark_name, str(r.benchmark_id)): r.wsi_path for r in items.itertuples(index=False)}
    refs: dict[tuple[str, str], list[Region]] = {}
    if regions is not None and len(regions):
        for key, frame in regions.groupby(["benchmark_name", "benchmark_id"]):
            refs[(key[0], str(key[1]))] = regions_from_frame(frame)
    written: list[Path] = []
    for run in runs.itertuples(index=False):
        if len(written) >= max_runs:
            break
        key = (run.benchmark_name, str(run.benchmark_id))
        wsi = paths.get(key)
        if not isinstance(wsi, str) or not wsi:
            continue
        out = root / run.benchmark_name / str(run.benchmark_id) / f"run{run.run_index}"
        try:
            overview = write_run_images(wsi, run.trajectory_json, out, refs.get(key, ()))
        except (SlideError, OSError):
            continue
        if overview is not None:
            written.append(overview)
    return written


def run_crops(overview: Path) -> list[Path]:
    """The crop pictures written beside ``overview``, in step order."""
    return sorted(overview.parent.glob("step*.png"), key=lambda p: int(p.stem.removeprefix("step")))


def preview_markdown(overview: Path, crops: Iterable[Path] = (), max_crops: int = 2) -> str:
    """Markdown showing the overview and the first crops inline (small JPEG data URIs), for the Dagster UI.

    Bounded: at most ``1 + max_crops`` pictures of long side ``PREVIEW_SIZE``, about 10-20 kB in all.
    """
    parts = [f"**{overview.parent.relative_to(overview.parents[3])}** (blue: viewed, green: reference)\n"]
    for path in [overview, *list(crops)[:max_crops]]:
        with Image.open(path) as img:
            small = img.convert("RGB")
            small.thumbnail((PREVIEW_SIZE, PREVIEW_SIZE))
            buf = io.BytesIO()
            small.save(buf, "JPEG", quality=80)
        data = base64.b64encode(buf.getvalue()).decode("ascii")
        parts.append(f"![{path.stem}](data:image/jpeg;base64,{data})")
    return "\n".join(parts)
