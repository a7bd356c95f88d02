"""The paper's figures as an asset, over real materializations of a partial grid at the scripted model on
the sample slides: x read from each experiment's settings (not its name), only cells that ran drawn (an
experiment not run is absent, never zero), the paper's points beside ours, PNGs and numbers in the
metadata, requested by the automation when a cell it reads updates; and an empty grid."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pandas as pd
import pytest
from dagster import AssetKey, AssetSelection, DagsterInstance, Definitions, materialize
from dagster import evaluate_automation_conditions as tick
from PIL import Image

from giant_assets.core.storage import ParquetStore
from giant_assets.demo.scripted import ScriptedModelServer, demo_policy
from giant_assets.eval.figures import FIGURES, figure_points, paper_figure_points
from giant_assets.eval.paper import paper_results
from giant_assets.experiments.spec import Experiment
from giant_assets.platform.definitions import ALL_ASSETS, RESOURCES
from giant_assets.platform.partitions import result_key
from giant_assets.report.paper_figures import write_figures
from tests.support.dagster_env import add_experiments, resources_for, write_experiments

BENCHMARK = "tcga_slidebench"  # three items, every slide readable
CELL = AssetSelection.assets("predictions", "trajectory_steps", "item_predictions", "benchmark_metrics")
FIGURES_ASSET = AssetSelection.assets("paper_figures")


def test_figures_of_a_partial_grid(tmp_path: Path, sample_wsi_root: Path) -> None:
    data = tmp_path / "data"
    instance = DagsterInstance.ephemeral()
    declared = tmp_path / "experiments.yaml"
    resources = resources_for(data, experiments_file=declared, wsi_root=str(sample_wsi_root))
    with ScriptedModelServer(rule=demo_policy) as server:
        model = {"model": "scripted-demo-2", "base_url": server.openai_base_url}
        giant = {"agent": "giant", **model, "max_steps": 2}
        experiments = {
            "g": giant,
            "g-steps-9": giant | {"max_steps": 3},  # named 9, runs 3: the figure reads max_steps
            "g-x2": giant | {"runs_per_item": 2},  # shares g's result set: the x1 vs x2 figure
            "g-steps-5": giant | {"max_steps": 5},  # declared, never run: no point, no zero
            "t-256": {"agent": "thumbnail", **model, "thumbnail_size": 256},
            "t-512": {"agent": "thumbnail", **model, "thumbnail_size": 512},  # not run
            "rr": {"agent": "random_patch", **model, "max_steps": 2, "random_patch_tool": "slide_zoom"},
        }
        write_experiments(declared, experiments)
        add_experiments(instance, *experiments)
        graph = Definitions(assets=ALL_ASSETS, resources=RESOURCES)

        def run(selection: AssetSelection, key=None) -> None:
            result = materialize(
                ALL_ASSETS, selection=selection, partition_key=key, resources=resources, instance=instance
            )
            assert result.success

        run(AssetSelection.assets("multipathqa_csv", "benchmark_items"))
        for name in ("g", "g-steps-9", "g-x2", "t-256", "rr"):
            run(CELL, result_key(name, BENCHMARK))
        run(FIGURES_ASSET)

        # a cell that it reads updates: the automation asks for the figures again
        first = tick(defs=graph, instance=instance)
        run(CELL, result_key("t-512", BENCHMARK))
        second = tick(defs=graph, instance=instance, cursor=first.cursor)
        assert second.get_num_requested(AssetKey("paper_figures")) == 1

    points = ParquetStore(data).read("paper_figures")
    ours = points[points["source"] == "ours"]
    metrics = ParquetStore(data).read("benchmark_metrics").set_index("experiment")
    iterations = ours[ours["figure"] == "iterations"].set_index("experiment")
    assert sorted(iterations.index) == ["g", "g-steps-9"]  # g-x2 votes 2 runs; g-steps-5 never ran
    assert iterations.loc["g-steps-9", "x"] == 3.0 and iterations.loc["g", "x"] == 2.0
    for name in ("g", "g-steps-9"):
        assert iterations.loc[name, "mean"] == pytest.approx(metrics.loc[name, "boot_mean_pct"])
        assert iterations.loc[name, "std"] == pytest.approx(metrics.loc[name, "boot_std_pct"])
    assert iterations["series"].nunique() == 1  # equal settings but max_steps: one line
    thumb = ours[ours["figure"] == "thumbnail_resolution"]
    assert thumb["x"].tolist() == [256.0]  # t-512 ran after the figures were drawn: absent, not zero
    versus = ours[ours["figure"] == "giant_vs_random"].set_index("experiment")["x_label"].to_dict()
    assert versus == {"g": "GIANT", "rr": "random regions"}
    runs = ours[ours["figure"] == "runs"].set_index("experiment")["x"].to_dict()
    assert runs == {"g": 1.0, "g-x2": 2.0}
    assert set(ours["benchmark_name"]) == {BENCHMARK}
    # the paper's points beside ours, equal to its Table 1 rows
    paper = points[points["source"] != "ours"]
    x5 = paper[(paper["figure"] == "runs") & (paper["x"] == 5) & (paper["benchmark_name"] == "gtex")]
    assert x5["mean"].tolist() == [60.7] and x5["std"].tolist() == [3.2]

    # PNGs on disk and inside the metadata, with the numbers
    folder = data / "results" / "figures"
    event = instance.get_latest_materialization_event(AssetKey("paper_figures"))
    meta = event.asset_materialization.metadata
    for figure in FIGURES:
        with Image.open(folder / f"{figure}.png") as png:
            assert png.size[0] > 300 and png.size[1] == 360
        md = meta[figure].value
        start = md.index("(data:image/png;base64,") + len("(data:image/png;base64,")
        with Image.open(io.BytesIO(base64.b64decode(md[start : md.index(")", start)]))) as inline:
            assert inline.size == png.size
    assert "g-steps-9" in meta["iterations"].value and "GPT-5 + GIANT" in meta["iterations"].value
    assert pd.read_csv(folder / "paper_figures.csv").shape[0] == len(points)


def test_an_empty_grid_draws_the_papers_points_only(tmp_path: Path) -> None:
    points = figure_points(pd.DataFrame(), {"g": Experiment(name="g", agent="giant", model="gpt-5")})
    assert (points["source"] != "ours").all() and len(points) == len(paper_figure_points())
    paths = write_figures(points, tmp_path)
    assert sorted(p.name for p in paths.values()) == sorted(f"{f}.png" for f in FIGURES)


def test_the_papers_figure_points_are_its_table_rows() -> None:
    """Every paper point of reference/paper_figures.csv equals the Table 1 (or baseline) cell it names."""
    table = paper_results().set_index(["model", "benchmark"])
    for p in paper_figure_points().itertuples():
        model = f"{p.series} x5" if p.figure == "runs" and p.x == 5 else p.series
        assert (
            table.loc[(model, p.benchmark_name), "mean"],
            table.loc[(model, p.benchmark_name), "std"],
        ) == (
            p.mean,
            p.std,
        ), p


def test_one_series_per_model_is_labelled_by_the_model_alone() -> None:
    """Series of a swept figure: one per model is named by the model; two sharing a model add the name of
    their first experiment (as the figure's legend shows them)."""
    giant = {"agent": "giant", "max_steps": 2}
    declared = {
        "a-2": Experiment(name="a-2", model="m1", **giant),
        "a-4": Experiment(name="a-4", model="m1", **giant | {"max_steps": 4}),  # a-2's series
        "b-2": Experiment(name="b-2", model="m2", **giant),
        "c-2": Experiment(name="c-2", model="m2", **giant | {"thumbnail_size": 512}),  # another m2 series
    }
    metrics = pd.DataFrame(
        {"experiment": list(declared), "benchmark_name": BENCHMARK, "boot_mean_pct": 50.0,
         "boot_std_pct": 1.0, "n_items": 3}
    )  # fmt: skip
    points = figure_points(metrics, declared, paper=paper_figure_points().iloc[:0])
    labels = points[points["figure"] == "iterations"].set_index("experiment")["series"].to_dict()
    assert labels == {
        "a-2": "m1 (openai)",
        "a-4": "m1 (openai)",
        "b-2": "m2 (openai) [b-2]",
        "c-2": "m2 (openai) [c-2]",
    }
