"""What the viewer shows, as plain dicts: one index row per item and one page per item with its runs.

Built from the ``predictions`` rows (``trajectory_json`` holds the steps), the ``item_predictions``
rows (voted label, correct), the ``benchmark_items`` rows (question, options, truth), the
``trajectory_pictures`` rows and the reference regions. No HTML here: the templates escape everything.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from giant_assets.report.trajectory_images import saw_something
from giant_assets.runs.records import parse_trajectory

# step fields shown in their own place on the page; any other field with a value is listed generically
KNOWN_STEP_FIELDS = frozenset(
    {"index", "attempt", "action", "box", "requested_box", "level", "image_size", "text", "reasoning",
     "report", "input_tokens", "output_tokens", "cost_usd", "latency_s", "error", "image_sha256"}
)  # fmt: skip
QUESTION_PREVIEW_CHARS = 180
HIGH_AGREEMENT = 0.8  # "confidently wrong": a wrong vote that at least this share of 2+ runs gave


def _present(value: Any) -> bool:
    if value is None:
        return False
    if isinstance(value, float) and math.isnan(value):
        return False
    return not (value is pd.NA or value is pd.NaT)


def _options(value: Any) -> list[str]:
    """The options cell as a list (Parquet gives back an array; no options is None/NaN)."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, Iterable):
        return []
    return [str(v) for v in value]


def answer_text(label: Any, options: list[str]) -> str:
    """A label as the reader knows it: ``2 · Adenocarcinoma`` for an option, the number itself else."""
    if not _present(label):
        return "—"
    label = int(label)
    if options and 1 <= label <= len(options):
        return f"{label} · {options[label - 1]}"
    return str(label)


def _outcome(voted: Any) -> str:
    if voted is None:
        return "unscored"
    if not bool(voted.get("slide_available", True)):
        return "unscored"
    return "correct" if bool(voted.get("correct")) else "wrong"


def _number(value: Any, default: float = 0.0) -> float:
    return float(value) if _present(value) else default


def _step_view(step: dict[str, Any]) -> dict[str, Any]:
    extra = {
        k: (v if isinstance(v, str | int | float | bool) else json.dumps(v))
        for k, v in step.items()
        if k not in KNOWN_STEP_FIELDS and (isinstance(v, bool) or v not in (None, "", 0, [], {}))
    }
    requested = step.get("requested_box")
    return {
        "index": step.get("index"),
        "action": step.get("action", ""),
        "box": step.get("box"),
        "level": step.get("level"),
        "image_size": step.get("image_size"),
        "text": step.get("text") or "",
        "reasoning": step.get("reasoning") or "",
        "report": step.get("report") or "",
        "requested_box": requested if requested and requested != step.get("box") else None,
        "input_tokens": int(step.get("input_tokens") or 0),
        "output_tokens": int(step.get("output_tokens") or 0),
        "cost_usd": _number(step.get("cost_usd")),
        "latency_s": _number(step.get("latency_s")),
        "error": step.get("error"),
        "attempt": step.get("attempt"),
        "image_sha256": list(step.get("image_sha256") or []),
        "picture": None,  # set by attach_pictures
        "picture_check": None,
        "extra": extra,
    }


def attach_pictures(run: dict[str, Any], pictures: dict[Any, dict[str, Any]]) -> None:
    """Point a run view at its picture records (by step index; ``None``: the map), ``path`` each."""
    run["overview"] = (pictures.get(None) or {}).get("path")
    for step in run["steps"]:
        picture = pictures.get(step["index"])
        step["picture"] = (picture or {}).get("path")
        step["picture_check"] = _check(picture, step["image_sha256"])
    run["pictures_pending"] = not pictures and saw_something(run["steps"])


def _check(picture: dict[str, Any] | None, recorded: list[str]) -> dict[str, Any] | None:
    """What the page says about a step's picture: the image sent (and whether its digest matches)."""
    if picture is None:
        return None
    sha = picture.get("sha256")
    if not _present(sha):
        return {"sent": False, "verified": None, "sha256": "", "recorded": ",".join(recorded)}
    verified = picture.get("verified")
    return {
        "sent": True,
        "verified": bool(verified) if _present(verified) else None,
        "sha256": str(sha),
        "recorded": ",".join(recorded),
    }


def _run_view(
    run: Any, options: list[str], truth: int, pictures: dict[Any, dict[str, Any]]
) -> dict[str, Any]:
    steps = parse_trajectory(run.trajectory_json) if _present(run.trajectory_json) else []
    label = run.predicted_label if _present(run.predicted_label) else None
    view = {
        "run_index": int(run.run_index),
        "answer_text": run.answer_text if _present(run.answer_text) else "",
        "label": None if label is None else int(label),
        "label_text": answer_text(label, options),
        "extraction": run.extraction if _present(run.extraction) else "",
        "correct": label is not None and int(label) == truth,
        "error_kind": run.error_kind if _present(run.error_kind) else None,
        "error": run.error if _present(run.error) else None,
        "input_tokens": int(run.input_tokens),
        "output_tokens": int(run.output_tokens),
        "cost_usd": _number(run.cost_usd),
        "latency_s": _number(run.latency_s),
        "n_steps": int(run.n_steps),
        "steps": [_step_view(s) for s in steps],
    }
    attach_pictures(view, pictures)
    return view


def reported_by_run(
    reported: Iterable[Mapping[str, Any]],
) -> dict[tuple[str, str, int], list[dict[str, Any]]]:
    """The regions a path review reported (``eval.qupath.reported_regions_of``), per (benchmark, item,
    run) in the reply's order, numbered from 1 per run as the review and the QuPath export number them:
    ``n``, level-0 ``box`` [x, y, w, h] and the model's texts."""
    out: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for region in reported:
        key = (str(region["benchmark_name"]), str(region["benchmark_id"]), int(region["run_index"]))
        shown = out.setdefault(key, [])
        shown.append(
            {
                "n": len(shown) + 1,
                "box": [float(v) for v in region["box"]],
                "finding": str(region.get("finding") or ""),
                "why_zoomed": str(region.get("why_zoomed") or ""),
                "relevance": str(region.get("diagnostic_relevance") or ""),
                "best_iou": region.get("best_iou"),
            }
        )
    return out


def item_pages(
    runs: pd.DataFrame,
    voted: pd.DataFrame,
    items: pd.DataFrame,
    pictures: pd.DataFrame,
    regions: pd.DataFrame | None = None,
    reported: Mapping[tuple[str, str, int], list[dict[str, Any]]] | None = None,
    answers_question: bool = True,
) -> list[dict[str, Any]]:
    """One page dict per item of ``items`` (in their order), each with its runs and their steps.

    ``pictures`` map to the PNG paths of ``trajectory_pictures`` (the ``path`` column); the site writer
    replaces them by links to copies beside the page. ``reported``: a path review's reported regions
    per run (``reported_by_run``), each run's ``reported``. ``answers_question`` False: the experiment
    answers no benchmark question (a path review), so its votes never count as a disagreement.
    """
    reported_of = reported or {}
    vote_of = {(str(v["benchmark_name"]), str(v["benchmark_id"])): v for v in voted.to_dict("records")}
    runs_of: dict[tuple[str, str], list[Any]] = {}
    for run in runs.sort_values("run_index").itertuples(index=False):
        runs_of.setdefault((str(run.benchmark_name), str(run.benchmark_id)), []).append(run)
    pics: dict[tuple[str, str, int], dict[Any, dict[str, Any]]] = {}
    for pic in pictures.to_dict("records"):
        step = int(pic["step"]) if _present(pic["step"]) else None  # None: the overview
        key = (str(pic["benchmark_name"]), str(pic["benchmark_id"]), int(pic["run_index"]))
        pics.setdefault(key, {})[step] = pic
    refs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    if regions is not None:
        for r in regions.itertuples(index=False):
            refs.setdefault((str(r.benchmark_name), str(r.benchmark_id)), []).append(
                {
                    "region_id": str(r.region_id),
                    "kind": r.kind,
                    "label": r.label if _present(r.label) else "",
                    "coords": json.dumps(r.coords if isinstance(r.coords, list) else list(r.coords)),
                }
            )
    pages = []
    for item in items.itertuples(index=False):
        key = (str(item.benchmark_name), str(item.benchmark_id))
        options = _options(getattr(item, "options", None))
        truth = int(item.truth_label)
        vote = vote_of.get(key)
        run_views = [
            _run_view(r, options, truth, pics.get((*key, int(r.run_index)), {}))
            | {"reported": reported_of.get((*key, int(r.run_index)), [])}
            for r in runs_of.get(key, [])
        ]
        voted_label = vote.get("predicted_label") if vote else None
        voted_label = int(voted_label) if _present(voted_label) else None
        errors = sorted({r["error_kind"] for r in run_views if r["error_kind"]})
        outcome = _outcome(vote)
        agreeing = sum(r["label"] is not None and r["label"] == voted_label for r in run_views)
        agreement = agreeing / len(run_views) if run_views and voted_label is not None else None
        pages.append(
            {
                "benchmark": key[0],
                "benchmark_id": key[1],
                "question": str(item.prompt),
                "options": options,
                "image_path": str(getattr(item, "image_path", "") or ""),
                "truth_label": truth,
                "truth_text": answer_text(truth, options),
                "voted_label": voted_label,
                "voted_text": answer_text(voted_label, options),
                "outcome": outcome,
                "agreement": agreement,  # share of runs that gave the voted label
                "agreeing": agreeing,
                "confidently_wrong": outcome == "wrong"
                and len(run_views) >= 2
                and (agreement or 0.0) >= HIGH_AGREEMENT,
                "n_runs": len(run_views),
                "n_steps": sum(r["n_steps"] for r in run_views),
                "cost_usd": sum(r["cost_usd"] for r in run_views),
                "errors": errors,
                "references": refs.get(key, []),
                "runs": run_views,
                "wsi_path": str(getattr(item, "wsi_path", "") or ""),
                "answers_question": answers_question,
            }
        )
    return pages


def index_row(page: dict[str, Any], href: str) -> dict[str, Any]:
    """The index's row for an item page (JSON-able: the per-benchmark fragments store these)."""
    question = page["question"]
    short = question if len(question) <= QUESTION_PREVIEW_CHARS else question[:QUESTION_PREVIEW_CHARS] + "…"
    return {
        "benchmark": page["benchmark"],
        "benchmark_id": page["benchmark_id"],
        "question": short,
        "prompt": question,
        "truth_text": page["truth_text"],
        "voted_text": page["voted_text"],
        "outcome": page["outcome"],
        "voted_label": page["voted_label"],
        "agreement": page["agreement"],
        "confidently_wrong": page["confidently_wrong"],
        "run_answers": [r["label_text"] for r in page["runs"]],
        "n_runs": page["n_runs"],
        "n_steps": page["n_steps"],
        "cost_usd": page["cost_usd"],
        "errors": page["errors"],
        "href": href,
        "answers_question": page.get("answers_question", True),
    }


def index_counts(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The numbers at the top of the index. Items of an experiment that answers no question (a path review)
    are ``reviewed``: neither correct nor wrong, and no accuracy is given for them."""
    answered = [r for r in rows if r.get("answers_question", True)]
    outcomes = [r["outcome"] for r in answered]
    scored = sum(o != "unscored" for o in outcomes)
    correct = outcomes.count("correct")
    return {
        "items": len(rows),
        "scored": scored,
        "correct": correct,
        "wrong": outcomes.count("wrong"),
        "unscored": outcomes.count("unscored"),
        "reviewed": len(rows) - len(answered),
        # as the headline counts it: every item, an unscored one (no slide) counting wrong
        "accuracy_pct": 100.0 * correct / len(answered) if answered else None,
        "with_errors": sum(bool(r["errors"]) for r in rows),
        "confidently_wrong": sum(bool(r.get("confidently_wrong")) for r in answered),
        "runs": sum(r["n_runs"] for r in rows),
        "steps": sum(r["n_steps"] for r in rows),
        "cost_usd": sum(r["cost_usd"] for r in rows),
    }
