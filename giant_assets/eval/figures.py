"""The numbers behind the paper's figures, from the stored metrics and the experiments' settings.

Four figures a reader compares with the paper (arXiv 2511.19652), each a set of *series* over benchmarks:

- ``iterations``: GIANT accuracy vs its step budget. A series is the GIANT experiments (one run per
  item) whose answer settings differ only in ``max_steps``; x is each experiment's ``max_steps`` (read
  from its settings, never from its name);
- ``thumbnail_resolution``: the thumbnail baseline vs ``thumbnail_size`` (the same rule);
- ``giant_vs_random``: GIANT next to the random-region ablation (``random_patch``) of the same provider,
  model and step budget (GIANT experiments without a declared ablation of theirs are left out);
- ``runs``: one run per item vs the vote of several (``runs_per_item``), GIANT experiments sharing one
  result set (config hash).

Only cells over today's items of declared experiments count (the caller passes the leaderboard's
current rows): an experiment not run on a benchmark has no point there, never a zero. The paper's
numbers come from ``reference/paper_figures.csv`` (one row per known point; the paper's figure values
that are not in its tables are not known here and have no row).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from giant_assets.benchmarks.registry import BUILT_IN_NAMES, ordered
from giant_assets.experiments.spec import Experiment

PAPER_FIGURES_CSV = Path(__file__).resolve().parent.parent / "reference" / "paper_figures.csv"
FIGURES = {
    "iterations": ("GIANT: accuracy vs iterations (max_steps)", "max_steps (model calls per run)"),
    "thumbnail_resolution": ("Thumbnail baseline: accuracy vs resolution", "thumbnail long side (px)"),
    "giant_vs_random": ("GIANT vs the random-region ablation", ""),
    "runs": ("GIANT: one run per item vs the vote of several", "runs per item"),
}
COLUMNS = [
    "figure",
    "series",
    "x",
    "x_label",
    "benchmark_name",
    "mean",
    "std",
    "n_items",
    "experiment",
    "source",
]
SWEPT = {"iterations": "max_steps", "thumbnail_resolution": "thumbnail_size"}
AGENT_OF = {"iterations": "giant", "thumbnail_resolution": "thumbnail"}


def paper_figure_points(path: Path | str = PAPER_FIGURES_CSV) -> pd.DataFrame:
    """The paper's known points: COLUMNS with ``source`` naming where each comes from."""
    table = pd.read_csv(path, dtype={"figure": str, "series": str, "x_label": str, "benchmark_name": str})
    missing = [c for c in ("figure", "series", "x", "x_label", "benchmark_name", "mean", "std", "source")
               if c not in table.columns]  # fmt: skip
    if missing:
        raise ValueError(f"{path}: missing column(s) {missing}")
    bad = sorted(set(table["figure"]) - set(FIGURES)) + sorted(
        set(table["benchmark_name"]) - set(BUILT_IN_NAMES)  # the paper's: MultiPathQA only
    )
    if bad:
        raise ValueError(f"{path}: unknown figure or benchmark name(s) {bad}")
    return table.assign(n_items=pd.NA, experiment=None)[COLUMNS]


def figure_points(
    metrics: pd.DataFrame, experiments: Mapping[str, Experiment], paper: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Every point of every figure: ours (``source`` "ours") from ``metrics`` (the current
    ``benchmark_metrics`` rows of declared experiments), then the paper's."""
    ours = metrics[metrics["experiment"].astype(str).isin(set(experiments))] if len(metrics) else metrics
    rows: list[dict] = []
    run = {(str(r["experiment"]), str(r["benchmark_name"])): r for _, r in ours.iterrows()}
    ran = {name for name, _ in run}
    exps = {n: e for n, e in experiments.items() if n in ran}
    for figure, (series_of, x_of) in _grouping(exps, experiments).items():
        for name, exp in exps.items():
            series = series_of(exp)
            if series is None:
                continue
            x, x_label = x_of(exp)
            for (who, benchmark), r in run.items():
                if who != name or pd.isna(r.get("boot_mean_pct")):
                    continue
                point = {"figure": figure, "series": series, "x": x, "x_label": x_label}
                rows.append(
                    point | {"benchmark_name": benchmark, "mean": float(r["boot_mean_pct"]),
                             "std": float(r["boot_std_pct"]), "n_items": int(r["n_items"]),
                             "experiment": name, "source": "ours"}
                )  # fmt: skip
    frames = [pd.DataFrame(rows, columns=COLUMNS)]
    paper = paper_figure_points() if paper is None else paper
    if len(paper):
        frames.append(paper[COLUMNS])
    kept = [f for f in frames if len(f)]
    out = pd.concat(kept, ignore_index=True) if kept else frames[0]
    order = {b: i for i, b in enumerate(ordered(out["benchmark_name"].dropna()))}
    return out.sort_values(
        ["figure", "source", "series", "x", "x_label", "benchmark_name"],
        key=lambda c: (
            c.map(order) if c.name == "benchmark_name" else c.ne("ours") if c.name == "source" else c
        ),
        kind="stable",
    ).reset_index(drop=True)


def _grouping(exps: Mapping[str, Experiment], declared: Mapping[str, Experiment]) -> dict:
    """figure -> (series label of an experiment or None when it is not in the figure, its x and label).
    ``exps``: the experiments with a cell to draw; ``declared``: every declared one."""
    labels = {f: _series_labels(exps, f) for f in SWEPT}

    def swept(figure: str):
        def series_of(exp: Experiment) -> str | None:
            return labels[figure].get(exp.name)

        return series_of, lambda exp: (float(getattr(exp, SWEPT[figure])), str(getattr(exp, SWEPT[figure])))

    def pair(exp: Experiment) -> tuple:
        return exp.provider, exp.model, exp.max_steps

    ablated = {pair(e) for e in declared.values() if e.agent == "random_patch" and e.runs_per_item == 1}

    def versus(exp: Experiment) -> str | None:
        """GIANT and the ablation of the same provider, model and step budget (a declared ablation)."""
        if exp.agent not in ("giant", "random_patch") or exp.runs_per_item != 1 or pair(exp) not in ablated:
            return None
        return f"{exp.model} ({exp.provider}), {exp.max_steps} steps"

    def runs(exp: Experiment) -> str | None:
        if exp.agent != "giant":
            return None
        shared = [e for e in exps.values() if e.agent == "giant" and e.config_hash() == exp.config_hash()]
        return f"{exp.model} ({exp.provider}), {exp.max_steps} steps" if len(shared) > 1 else None

    return {
        "iterations": swept("iterations"),
        "thumbnail_resolution": swept("thumbnail_resolution"),
        "giant_vs_random": (
            versus,
            lambda e: (float("nan"), "GIANT" if e.agent == "giant" else "random regions"),
        ),
        "runs": (runs, lambda e: (float(e.runs_per_item), f"x{e.runs_per_item}")),
    }


def _series_labels(exps: Mapping[str, Experiment], figure: str) -> dict[str, str]:
    """experiment -> its series in a swept figure: experiments (one run per item, the figure's agent)
    whose answer settings are equal but for the swept field share a series, labelled by the model (and
    the first experiment's name when two series share a model)."""
    field = SWEPT[figure]
    groups: dict[str, list[Experiment]] = {}
    for exp in exps.values():
        if exp.agent != AGENT_OF[figure] or exp.runs_per_item != 1:
            continue
        settings = {k: v for k, v in exp.answer_settings().items() if k != field}
        groups.setdefault(json.dumps(settings, sort_keys=True, default=str), []).append(exp)
    models = [g[0].model for g in groups.values()]
    out = {}
    for members in groups.values():
        first = min(members, key=lambda e: e.name)
        label = f"{first.model} ({first.provider})"
        if models.count(first.model) > 1:
            label += f" [{first.name}]"
        out.update({e.name: label for e in members})
    return out
