"""Assets: pictures of what each run saw, and the static trajectory viewer built from them."""

import html
import shutil
import time
from pathlib import Path
from typing import Literal

import pandas as pd
from dagster import AssetExecutionContext, Config, MetadataValue, asset
from pydantic import Field

from giant_assets.core.money import usd_text
from giant_assets.core.paths import confined_path
from giant_assets.core.settings import DEFAULT_VIEWER_URL, VIEWER_URL_ENV, env
from giant_assets.eval.leaderboard import UNSCORED_AGENTS
from giant_assets.eval.scoring import rescore
from giant_assets.experiments.spec import Experiment
from giant_assets.platform.assets.scores import refuse_foreign_runs
from giant_assets.platform.automation import FOLLOWS_CELL
from giant_assets.platform.partitions import cell, results_partitions
from giant_assets.platform.resources import ExperimentsResource, MultiPathQAResource, StorageResource
from giant_assets.report.trajectory_images import preview_markdown, selected_runs, write_pictures
from giant_assets.report.viewer import item_pages, served_url, write_benchmark
from giant_assets.report.viewer.pages import reported_by_run

PREVIEW_ROWS = 8


def _regions(
    dataset: MultiPathQAResource, experiments: ExperimentsResource, benchmark: str
) -> pd.DataFrame | None:
    """The reference regions of ``benchmark``, from the very source ``roi_evaluation`` scores against."""
    _, regions = dataset.reference_regions(experiments.benchmark_names())
    return None if regions is None else regions[regions["benchmark_name"] == benchmark]


def _reported(spec: Experiment, predictions: pd.DataFrame) -> dict[tuple[str, str, int], list[dict]]:
    """A path review's reported regions per run, as ``path_review_regions`` holds them; none for other
    agents."""
    if spec.agent != "path_review":
        return {}
    from giant_assets.eval.qupath import reported_regions_of  # shapely: only for a path review's cells

    return reported_by_run(reported_regions_of(predictions))


class PicturesConfig(Config):
    workers: int = Field(default=1, ge=1, le=64, description="slides drawn in parallel threads")
    render: Literal["none", "selected", "all"] = Field(
        default="none",
        description="which runs are drawn now: none; selected = the items whose vote is wrong or whose "
        "runs disagree; all = every run (measured 1.4-2.9 s and 810 KB a run of 5 zooms, docs/viewer.md). "
        "The others are drawn by the served viewer (make view, giant-view) when their page is first opened.",
    )


@asset(partitions_def=results_partitions, group_name="report", kinds={"pillow", "openslide"})
def trajectory_pictures(
    context: AssetExecutionContext,
    config: PicturesConfig,
    predictions: pd.DataFrame,
    item_predictions: pd.DataFrame,
    benchmark_items: pd.DataFrame,
    storage: StorageResource,
    dataset: MultiPathQAResource,
    experiments: ExperimentsResource,
) -> pd.DataFrame:
    """One row per picture file: each run's map (thumbnail, numbered viewed boxes in blue, reference
    regions in green), then each image as its model received it (GIANT: re-rendered by the agent's own
    code and checked against the recorded SHA-256, ``verified``) or, for other agents, each viewed box
    re-read from the slide. ``render`` (config) says which runs are drawn now; the served viewer draws
    the others on demand.

    Files: ``<data_dir>/trajectories/<experiment>/<benchmark>/<benchmark_id>/run<k>/``; the partition's
    folder is replaced on every materialization.
    """
    experiment, benchmark = cell(context)
    spec = experiments.get(experiment)
    root = confined_path(storage.root, "trajectories", experiment)
    folder = confined_path(root, benchmark)
    if folder.exists():
        shutil.rmtree(folder)
    items = benchmark_items[benchmark_items["benchmark_name"] == benchmark]
    started = time.perf_counter()
    regions = _regions(dataset, experiments, benchmark)
    runs = predictions
    if config.render == "selected":
        runs = selected_runs(rescore(predictions, items, spec.panda_null_grade), item_predictions)
    elif config.render == "none":
        runs = predictions.iloc[:0]
    pictures = write_pictures(
        runs,
        items,
        root,
        regions,
        workers=config.workers,
        on_error=context.log.warning,
        experiment=spec,
        reported=_reported(spec, runs),
    )
    seconds = time.perf_counter() - started
    pictures.insert(0, "experiment", experiment)
    overviews = pictures[pictures["kind"] == "overview"]
    preview = {}
    if len(overviews):
        first = overviews.iloc[0]
        crops = pictures[(pictures["run_index"] == first.run_index) & (pictures["kind"] == "crop")]
        crops = crops[crops["benchmark_id"] == first.benchmark_id]
        title = f"{benchmark} / {first.benchmark_id} / run {first.run_index}"
        preview = {
            "first_overview": MetadataValue.path(first.path),
            "preview": MetadataValue.md(
                preview_markdown(Path(first.path), map(Path, crops["path"]), title=title)
            ),
        }
    context.add_output_metadata(
        {
            "experiment": experiment,
            "folder": MetadataValue.path(str(folder)),
            "render": config.render,
            "runs": len(predictions),
            "runs_drawn": len(overviews),
            "pictures": len(pictures),
            "seconds": round(seconds, 3),
            "ms_per_run": round(1000 * seconds / len(overviews), 1) if len(overviews) else 0.0,
            **preview,
        }
    )
    return pictures


def _preview_table(rows: list[dict]) -> str:
    """A small Markdown table of index rows (cells stripped of Markdown/HTML specials)."""

    def cell(value: object) -> str:
        text = html.escape(" ".join(str(value).split())[:80])
        for ch in "\\|`*_[]":
            text = text.replace(ch, "\\" + ch)
        return text

    lines = ["| id | question | truth | voted | outcome | steps | cost |", "|---|---|---|---|---|---|---|"]
    for r in rows[:PREVIEW_ROWS]:
        lines.append(
            "| "
            + " | ".join(
                cell(v)
                for v in (
                    r["benchmark_id"],
                    r["question"],
                    r["truth_text"],
                    r["voted_text"],
                    r["outcome"],
                    r["n_steps"],
                    usd_text(r["cost_usd"]),
                )  # fmt: skip
            )
            + " |"
        )
    return "\n".join(lines)


@asset(
    partitions_def=results_partitions, group_name="report", kinds={"html"}, automation_condition=FOLLOWS_CELL
)
def trajectory_viewer(
    context: AssetExecutionContext,
    predictions: pd.DataFrame,
    item_predictions: pd.DataFrame,
    benchmark_items: pd.DataFrame,
    trajectory_pictures: pd.DataFrame,
    storage: StorageResource,
    dataset: MultiPathQAResource,
    experiments: ExperimentsResource,
) -> None:
    """A static site per experiment, ``<data_dir>/viewer/<experiment>/index.html``: every item with its
    runs as timelines of what the agent saw and said (a path review's reported regions drawn over the
    slide, computed from its runs as ``path_review_regions`` stores them). The ``index`` link in the
    metadata is the page on the viewer's server (``make view``; another address: ``GIANT_VIEWER_URL``);
    the site also opens from disk (``index_path``).

    Run labels are re-extracted from the stored answers as ``item_predictions`` does, so each run's
    label agrees with the vote shown beside it; stored runs that answer other items than today's fail it
    as they fail ``item_predictions``.
    """
    experiment, benchmark = cell(context)
    items = benchmark_items[benchmark_items["benchmark_name"] == benchmark]
    started = time.perf_counter()
    spec = experiments.get(experiment)
    refuse_foreign_runs(experiment, benchmark, predictions, items)  # never old answers under new questions
    runs = rescore(predictions, items, spec.panda_null_grade)
    regions = _regions(dataset, experiments, benchmark)
    reported = _reported(spec, predictions)
    answers = spec.agent not in UNSCORED_AGENTS  # a path review's votes are no answers to compare
    pages = item_pages(runs, item_predictions, items, trajectory_pictures, regions, reported, answers)
    viewer_root = confined_path(storage.root, "viewer")
    site = write_benchmark(
        confined_path(viewer_root, experiment), benchmark, pages, spec.model_dump(mode="json")
    )
    mine = [r for r in site.rows if r["benchmark"] == benchmark]
    base = env(VIEWER_URL_ENV) or DEFAULT_VIEWER_URL
    context.add_output_metadata(
        {
            "experiment": experiment,
            "index": MetadataValue.url(served_url(base, site.index, viewer_root)),
            "index_path": MetadataValue.path(str(site.index)),
            "how_to_open": (
                f"`index` is served by `make view` (at {DEFAULT_VIEWER_URL}; elsewhere set "
                f"{VIEWER_URL_ENV} to the server's address, e.g. behind `ssh -L 8765:127.0.0.1:8765`); "
                "without a server open `index_path` in a browser"
            ),
            "item_pages": len(site.pages),
            "pictures": site.pictures,
            "pages_drawn_on_first_visit": site.pending,  # by make view / giant-view
            "items_in_index": len(site.rows),
            "seconds": round(time.perf_counter() - started, 3),
            "preview": MetadataValue.md(_preview_table(mine)),
        }
    )
