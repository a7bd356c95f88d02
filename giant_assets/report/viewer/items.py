"""One page per item across experiments: ``<viewer>/_items/<benchmark>/<benchmark_id>/index.html``.

Built from every experiment's index rows of the benchmark (``<viewer>/<experiment>/_rows/<benchmark>.json``,
which ``site.write_benchmark`` writes), so each experiment's build refreshes the benchmark's pages with
what every other experiment answered. ``_items/<benchmark>.js`` carries, per item, how many experiments
answered it and whether their voted answers disagree: each experiment's index loads it with a
``<script>`` tag (works from file://) to filter "experiments disagree" with current data. ``_items``
cannot clash with an experiment: experiment names start with a letter or digit.
"""

from __future__ import annotations

import fcntl
import json
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pandas as pd

from giant_assets.core.files import atomic_write_bytes
from giant_assets.core.paths import confined_path, decode_component, encode_component

if TYPE_CHECKING:
    from jinja2 import Environment

ITEMS_DIR = "_items"
ROWS_DIR = "_rows"
STATIC_FILES = ("viewer.css", "viewer.js")
# fields an index row written before the cross-experiment pages lacks
ROW_DEFAULTS = {"agreement": None, "confidently_wrong": False, "run_answers": [], "answers_question": True}


def _href(*names: str) -> str:
    return "/".join(quote(n, safe="") for n in names)


def cross_href(benchmark: str, benchmark_id: str) -> str:
    """From an experiment's item page (``<exp>/<benchmark>/<id>/``) to the item's cross-experiment page."""
    return "../../../" + item_href(benchmark, benchmark_id)


def item_href(benchmark: str, benchmark_id: str) -> str:
    """The cross-experiment page of an item, relative to the viewer's root."""
    return _href(*(encode_component(n) for n in (ITEMS_DIR, benchmark, str(benchmark_id), "index.html")))


def summary_href(benchmark: str) -> str:
    """The benchmark's ``.js`` summary, relative to the viewer's root."""
    return _href(encode_component(ITEMS_DIR), encode_component(f"{benchmark}.js"))


def experiment_rows(viewer_root: Path, benchmark: str) -> dict[str, list[dict[str, Any]]]:
    """Every experiment's index rows of ``benchmark``, by experiment name."""
    out = {}
    for site in sorted(p for p in viewer_root.iterdir() if p.is_dir() and not p.name.startswith("_")):
        fragment = confined_path(site, ROWS_DIR, f"{benchmark}.json")
        if fragment.is_file():
            out[decode_component(site.name)] = json.loads(fragment.read_text(encoding="utf-8"))
    return out


def disagree(entries: list[dict[str, Any]]) -> bool:
    """Two or more experiments scored the item and their voted answers differ (a row written before
    votes were recorded in it, or of an experiment that answers no question, a path review, does not
    take part)."""
    scored = [
        e["voted_label"]
        for e in entries
        if e["outcome"] != "unscored" and "voted_label" in e and e.get("answers_question", True)
    ]
    return len(scored) >= 2 and len(set(scored)) > 1


def disagreeing_items(item_predictions: pd.DataFrame) -> pd.DataFrame:
    """Per item scored by two or more experiments whose voted labels differ: one row per experiment
    pair that disagrees (``benchmark_name, benchmark_id, experiment_a, experiment_b, label_a, label_b``,
    a before b by name; a missing label counts as an answer of its own)."""
    columns = ["benchmark_name", "benchmark_id", "experiment_a", "experiment_b", "label_a", "label_b"]
    rows = []
    frame = item_predictions
    if "slide_available" in frame.columns:
        frame = frame[frame["slide_available"].fillna(True).astype(bool)]
    for (benchmark, benchmark_id), group in frame.groupby(["benchmark_name", "benchmark_id"], sort=True):
        votes = sorted(zip(group["experiment"].astype(str), group["predicted_label"], strict=True))
        for i, (a, label_a) in enumerate(votes):
            for b, label_b in votes[i + 1 :]:
                if _label(label_a) != _label(label_b):
                    rows.append([benchmark, str(benchmark_id), a, b, _label(label_a), _label(label_b)])
    return pd.DataFrame(rows, columns=columns)


def _label(value: Any) -> int | None:
    return None if pd.isna(value) else int(value)


def disagreements_markdown(pairs: pd.DataFrame, base_url: str, limit: int = 40) -> str:
    """The disagreeing items as a Markdown table, each linked to its cross-experiment page at ``base_url``."""
    if not len(pairs):
        return "no item on which two experiments disagree"
    lines = ["| benchmark | item | a | b | answers | viewer |", "|---|---|---|---|---|---|"]
    for r in pairs.head(limit).itertuples(index=False):
        url = base_url.rstrip("/") + "/" + item_href(r.benchmark_name, r.benchmark_id)
        cells = [
            r.benchmark_name,
            r.benchmark_id,
            r.experiment_a,
            r.experiment_b,
            f"{r.label_a} vs {r.label_b}",
        ]
        cells = [str(c).replace("|", "\\|").replace("[", "\\[").replace("]", "\\]") for c in cells]
        lines.append("| " + " | ".join(cells) + f" | [every experiment]({url}) |")
    if len(pairs) > limit:
        lines.append(f"\n{len(pairs) - limit} more in the viewer's index (filter: experiments disagree)")
    return "\n".join(lines)


def rebuild_items(viewer_root: Path, benchmark: str, env: Environment) -> int:
    """Rewrite ``benchmark``'s cross-experiment pages and its ``.js`` summary (under a lock); returns the
    number of pages written."""
    items_root = confined_path(viewer_root, ITEMS_DIR)
    items_root.mkdir(parents=True, exist_ok=True)
    with open(items_root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        by_item: dict[str, list[dict[str, Any]]] = {}
        for experiment, rows in experiment_rows(viewer_root, benchmark).items():
            up = "../../../" + _href(encode_component(experiment)) + "/"  # from _items/<benchmark>/<id>/
            for row in rows:
                entry = ROW_DEFAULTS | row | {"experiment": experiment, "href": up + row["href"]}
                by_item.setdefault(str(row["benchmark_id"]), []).append(entry)
        template = env.get_template("cross.html")
        summary = {}
        for benchmark_id, entries in by_item.items():
            path = confined_path(items_root, benchmark, benchmark_id, "index.html")
            path.parent.mkdir(parents=True, exist_ok=True)
            first = entries[0]
            html = template.render(
                benchmark=benchmark,
                benchmark_id=benchmark_id,
                question=first.get("prompt") or first["question"],
                truth_text=first["truth_text"],
                entries=entries,
                disagree=disagree(entries),
                root="../../",  # the static files are in _items/static/
            )
            atomic_write_bytes(path, html.encode("utf-8"))
            summary[benchmark_id] = {"experiments": len(entries), "disagree": disagree(entries)}
        script = f"(window.GIANT_ITEMS = window.GIANT_ITEMS || {{}})[{json.dumps(benchmark)}] = "
        script += json.dumps(summary, sort_keys=True) + ";\n"
        atomic_write_bytes(confined_path(items_root, f"{benchmark}.js"), script.encode("utf-8"))
        for name in STATIC_FILES:
            data = resources.files("giant_assets.report.viewer").joinpath("static", name).read_bytes()
            atomic_write_bytes(items_root / "static" / name, data)
        return len(by_item)
