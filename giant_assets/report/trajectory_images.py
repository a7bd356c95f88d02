"""Pictures of where an agent looked: per run a map (thumbnail, numbered viewed boxes in blue, reference
regions in green, a path review's reported regions R1, R2... in orange), then each image as the model
received it (GIANT: re-rendered by the agent's own code, guides included, checked against the recorded
digest) or, for other agents, each viewed box re-read from the slide.

Layout: ``<root>/<benchmark>/<benchmark_id>/run<k>/overview.png`` and ``step<i>.jpg`` (the bytes sent;
``.png`` for a re-read crop or a PNG-sending experiment; ``i`` the step's index, unique across a run's
attempts), every name built by ``core.paths.confined_path`` so no benchmark id can leave ``root``.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd
from PIL import Image, ImageDraw, ImageFont

from giant_assets.core.paths import confined_path
from giant_assets.experiments.spec import Experiment
from giant_assets.geometry.roi import Region, regions_from_frame
from giant_assets.report.sent_images import SentImage, render_sent_images, renders_sent_images
from giant_assets.runs.records import RUN_KEY, parse_trajectory
from giant_assets.runs.viewed import finite_box, viewed_steps
from giant_assets.slides.access import InvalidRegion, SlideError, Thumbnail, crop, open_slide, thumbnail

VIEWED = (0, 160, 255)
REFERENCE = (40, 200, 40)
REPORTED = (255, 140, 0)  # a path review's reported regions, orange as on the review page
OVERVIEW_SIZE = 768
CROP_SIZE = 384
PREVIEW_SIZE = 320  # long side of the pictures embedded in asset metadata (a few kB each)
PNG_COMPRESS_LEVEL = 1  # zlib level: pictures are photographs; level 6 costs ~3x the CPU for ~10% bytes
PICTURE_COLUMNS = {
    "config_hash": "object",
    "benchmark_name": "object",
    "benchmark_id": "object",
    "run_index": "int64",
    "kind": "object",  # "overview" (the map) | "thumbnail" (the overview as sent) | "crop"
    "step": "Int64",  # the picture's step index; null for the map
    "path": "object",  # absolute path of the file (a sent image: the very bytes sent)
    "width": "int64",
    "height": "int64",
    "sha256": "object",  # a sent image's SHA-256; null for the map and for re-read crops
    "verified": "boolean",  # equal to the digest the trajectory recorded; null: nothing recorded
}


def extent_steps(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A one-call baseline's answer step, recording the view it answered from (the thumbnail's extent)."""
    return [s for s in steps if s.get("action") == "answer" and s.get("box")]


def run_dir(root: Path, benchmark: str, benchmark_id: str, run_index: int) -> Path:
    """The folder of one run's pictures, confined to ``root`` whatever the id holds."""
    return confined_path(root, benchmark, str(benchmark_id), f"run{int(run_index)}")


def _font(size: int) -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1 has one bitmap size
        return ImageFont.load_default()


def _draw_region(draw: ImageDraw.ImageDraw, region: Region, to_px) -> None:
    geom = region.geometry()
    for poly in getattr(geom, "geoms", [geom]):
        ring = [to_px(x, y) for x, y in poly.exterior.coords]
        draw.line(ring, fill=REFERENCE, width=3)


def saw_something(steps: list[dict[str, Any]]) -> bool:
    """The run has a picture to draw: it saw the slide (a thumbnail, a viewed region, a baseline's view)."""
    return any(s.get("action") == "thumbnail" for s in steps) or bool(
        viewed_steps(steps) or extent_steps(steps)
    )


class RunWork(NamedTuple):
    """One run to draw: its steps, the folder of its pictures, the item's reference regions and the
    level-0 boxes [x, y, w, h] a path review reported (drawn R1, R2... in orange)."""

    steps: list[dict[str, Any]]
    out_dir: Path
    references: Iterable[Region] = ()
    reported: Sequence[Sequence[float]] = ()


def _outline(
    draw: ImageDraw.ImageDraw, corners: list[float], colour, label: str, font, limit: int, below: bool = False
) -> None:
    """A box's outline and its label on white, inside its top-left corner (``below``: under its
    bottom-left one, clear of a crop's number on the same box); corners clamped to +-``limit`` pixels (a
    reply's box far outside the slide must not overflow the drawing)."""
    x0, y0, x1, y1 = (min(max(v, -limit), limit) for v in corners)
    draw.rectangle([x0, y0, x1, y1], outline=colour, width=2)
    if label:
        at = (x0 + 3, y1 + 2) if below else (x0 + 3, y0 + 2)
        draw.rectangle(draw.textbbox(at, label, font=font), fill=(255, 255, 255))
        draw.text(at, label, fill=colour, font=font)


def _draw_on_slide(
    slide,
    base: Thumbnail,
    work: RunWork,
    sent: list[SentImage] | None = None,
) -> list[dict[str, Any]]:
    """One run's pictures on an open slide whose overview thumbnail ``base`` is already read: the map,
    then the images ``sent`` to the model when given, else each viewed box re-read without guides."""
    steps, out_dir, references = work.steps, work.out_dir, work.references
    out_dir.mkdir(parents=True, exist_ok=True)
    records: list[dict[str, Any]] = []
    image = base.image.convert("RGB")  # a fresh copy to draw on
    draw = ImageDraw.Draw(image)
    font = _font(16)
    (ox, oy), (sx, sy) = base.offset, base.scale
    limit = 4 * max(image.size)

    def to_px(x: float, y: float) -> tuple[float, float]:
        return ox + x * sx, oy + y * sy

    for region in references:
        _draw_region(draw, region, to_px)
    for step in extent_steps(steps):  # what a thumbnail baseline saw: its outline, unnumbered
        x, y, w, h = step["box"]
        draw.rectangle([*to_px(x, y), *to_px(x + w, y + h)], outline=VIEWED, width=2)
    for number, box in enumerate(work.reported, start=1):
        if (shown := finite_box(box)) is not None:
            x, y, w, h = shown
            corners = [*to_px(x, y), *to_px(x + w, y + h)]
            _outline(draw, corners, REPORTED, f"R{number}", font, limit, below=True)
    for number, step in enumerate(viewed_steps(steps), start=1):
        x, y, w, h = step["box"]
        _outline(draw, [*to_px(x, y), *to_px(x + w, y + h)], VIEWED, str(number), font, limit)
        if sent is not None:
            continue
        try:
            picture = crop(slide, [x, y, w, h], CROP_SIZE).image.convert("RGB")
        except InvalidRegion:
            continue  # the model was told the region was invalid; nothing was shown
        path = out_dir / f"step{step['index']}.png"
        picture.save(path, compress_level=PNG_COMPRESS_LEVEL)
        records.append({"kind": "crop", "step": step["index"], "path": str(path), "size": picture.size})
    for shown in sent or []:
        path = out_dir / f"step{shown.step}.{shown.extension}"
        path.write_bytes(shown.data)  # the bytes the model received, not re-encoded
        with Image.open(io.BytesIO(shown.data)) as decoded:
            size = decoded.size
        records.append(
            {"kind": shown.kind, "step": shown.step, "path": str(path), "size": size,
             "sha256": shown.sha256, "verified": shown.verified}
        )  # fmt: skip
    overview = out_dir / "overview.png"
    image.save(overview, compress_level=PNG_COMPRESS_LEVEL)
    records.insert(0, {"kind": "overview", "step": None, "path": str(overview), "size": image.size})
    return records


def draw_runs(
    wsi_path: str,
    runs: Sequence[RunWork | tuple[Any, ...]],
    experiment: Experiment | None = None,
) -> list[list[dict[str, Any]]]:
    """Pictures of several runs on one slide (a ``RunWork`` each, or its fields as a tuple), opening it
    and reading its overview once; per run, one record per file written (none for a run that saw nothing).

    Each run gets ``overview.png`` (the map). A GIANT ``experiment``'s runs then get every image their
    model was sent, re-rendered by the agent's own code (``sent_images``: guides and encoding included,
    checked against the recorded digests); other runs get each viewed box re-read without guides. A
    box the slide refused (the model was told so) gets a numbered outline but no picture.
    """
    jobs = [RunWork(*run) for run in runs]
    if not any(saw_something(job.steps) for job in jobs):
        return [[] for _ in jobs]
    sent: list[list[SentImage] | None] = [None] * len(jobs)
    if renders_sent_images(experiment):
        assert experiment is not None
        sent = list(render_sent_images(experiment, wsi_path, [job.steps for job in jobs]))
    slide = open_slide(wsi_path)
    try:
        base = thumbnail(slide, OVERVIEW_SIZE, guides=False)
        return [
            _draw_on_slide(slide, base, job, images) if saw_something(job.steps) else []
            for job, images in zip(jobs, sent, strict=True)
        ]
    finally:
        slide.close()


def draw_run(
    wsi_path: str,
    steps: list[dict[str, Any]],
    out_dir: Path,
    references: Iterable[Region] = (),
    experiment: Experiment | None = None,
    reported: Sequence[Sequence[float]] = (),
) -> list[dict[str, Any]]:
    """One run's pictures into ``out_dir`` (see ``draw_runs``)."""
    return draw_runs(wsi_path, [RunWork(steps, out_dir, references, reported)], experiment)[0]


def _regions_by_item(regions: pd.DataFrame | None) -> dict[tuple[str, str], list[Region]]:
    if regions is None or not len(regions):
        return {}
    return {
        (str(b), str(i)): regions_from_frame(frame)
        for (b, i), frame in regions.groupby(["benchmark_name", "benchmark_id"])
    }


def write_pictures(
    runs: pd.DataFrame,
    items: pd.DataFrame,
    root: Path,
    regions: pd.DataFrame | None = None,
    workers: int = 1,
    on_error=None,
    experiment: Experiment | None = None,
    reported: Mapping[tuple[str, str, int], Sequence[Mapping[str, Any]]] | None = None,
) -> pd.DataFrame:
    """Pictures of every run in ``runs`` (prediction rows) under ``root``; one row per file written.

    ``items`` give each item's resolved ``wsi_path``; ``regions`` (a ``load_reference_regions`` frame)
    are drawn in green. Each slide is opened and its overview read once for all its runs; slides are
    drawn in ``workers`` threads (1 by default: on a busy 2-core machine threads measured slower, 66 ms
    per run serial vs 94-100 ms with 2-4 threads). A slide that cannot be read skips its runs
    (``on_error(message)`` is told): pictures never fail an evaluation. ``experiment`` (the runs'
    experiment) decides whether the images sent are re-rendered (see ``draw_runs``); ``reported`` a path
    review's reported regions per (benchmark, item, run) (``viewer.pages.reported_by_run``), drawn on
    their run's map.
    """
    paths = {(str(r.benchmark_name), str(r.benchmark_id)): r.wsi_path for r in items.itertuples(index=False)}
    refs = _regions_by_item(regions)
    reported = reported or {}
    by_slide: dict[str, list[Any]] = {}
    for run in runs.itertuples(index=False):
        key = (str(run.benchmark_name), str(run.benchmark_id))
        wsi = paths.get(key)
        if isinstance(wsi, str) and wsi:
            by_slide.setdefault(wsi, []).append(run)

    def work_of(run: Any) -> RunWork:
        item = (str(run.benchmark_name), str(run.benchmark_id))
        return RunWork(
            parse_trajectory(run.trajectory_json),
            run_dir(root, run.benchmark_name, run.benchmark_id, run.run_index),
            refs.get(item, ()),
            [r["box"] for r in reported.get((*item, int(run.run_index)), [])],
        )

    def draw_slide(job: tuple[str, list[Any]]) -> list[dict[str, Any]]:
        wsi, slide_runs = job
        work = [work_of(run) for run in slide_runs]
        try:
            drawn = draw_runs(wsi, work, experiment)
        except (SlideError, OSError) as exc:
            if on_error is not None:
                names = ", ".join(
                    f"{r.benchmark_name}/{r.benchmark_id} run {r.run_index}" for r in slide_runs
                )
                on_error(f"no pictures of {names}: {exc}")
            return []
        rows = []
        for run, records in zip(slide_runs, drawn, strict=True):
            ids = {key: getattr(run, key) for key in RUN_KEY} | {"benchmark_id": str(run.benchmark_id)}
            rows += [{**ids, **r, "width": r["size"][0], "height": r["size"][1]} for r in records]
        return rows

    jobs = list(by_slide.items())
    if workers > 1 and len(jobs) > 1:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pictures") as pool:
            drawn = list(pool.map(draw_slide, jobs))
    else:
        drawn = [draw_slide(job) for job in jobs]
    records = [r for run_records in drawn for r in run_records]
    frame = pd.DataFrame.from_records(records, columns=list(PICTURE_COLUMNS))
    return frame.astype(PICTURE_COLUMNS)


def selected_runs(runs: pd.DataFrame, voted: pd.DataFrame) -> pd.DataFrame:
    """The runs of the items worth a look first: the voted answer is wrong, or the runs disagree.

    ``runs`` carry each run's re-extracted ``predicted_label`` (``eval.scoring.rescore``), ``voted`` is
    the ``item_predictions`` rows (``correct``, ``slide_available``).
    """
    if not len(runs):
        return runs
    keys = ["benchmark_name", "benchmark_id"]
    wrong = {
        (str(v["benchmark_name"]), str(v["benchmark_id"]))
        for v in voted.to_dict("records")
        if bool(v.get("slide_available", True)) and not bool(v.get("correct"))
    }
    labels = runs["predicted_label"].astype("Int64").astype("string").fillna("none")
    distinct = labels.groupby([runs[k].astype(str) for k in keys]).nunique()
    disagree = {key for key, n in distinct.items() if n > 1}
    chosen = [
        (str(b), str(i)) in wrong | disagree
        for b, i in zip(runs["benchmark_name"], runs["benchmark_id"], strict=True)
    ]
    return runs[chosen]


def preview_markdown(overview: Path, crops: Iterable[Path] = (), max_crops: int = 2, title: str = "") -> str:
    """Markdown showing the overview and the first crops inline (small JPEG data URIs), for the Dagster UI.

    Bounded: at most ``1 + max_crops`` pictures of long side ``PREVIEW_SIZE``, about 10-20 kB in all.
    """
    parts = [f"**{title or overview.parent.name}** (blue: viewed, green: reference)\n"]
    for path in [overview, *list(crops)[:max_crops]]:
        with Image.open(path) as img:
            small = img.convert("RGB")
            small.thumbnail((PREVIEW_SIZE, PREVIEW_SIZE))
            buf = io.BytesIO()
            small.save(buf, "JPEG", quality=80)
        data = base64.b64encode(buf.getvalue()).decode("ascii")
        parts.append(f"![{path.stem}](data:image/jpeg;base64,{data})")
    return "\n".join(parts)
