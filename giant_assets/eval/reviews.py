"""A blinded pathologist review, stored durably: reviewers and their tokens, the queue of runs to review,
and every submitted review (plain files under ``<data>/reviews/``, no Dagster).

- ``reviewers.json``: each reviewer's name and the SHA-256 of their token (the token is shown once).
- ``secret``: random bytes keying the opaque unit ids and each reviewer's order (so neither reveals the
  experiment nor can be recomputed from its name).
- ``queue.json``: the units, one per (experiment, benchmark, item, run): what the reviewer sees (question,
  answer, viewed regions with the model's reasons) and, apart from it, what they must not see (truth,
  experiment, model).
- ``submitted/<reviewer>.jsonl``: append-only, one JSON line per submission, written in one ``write``
  under an exclusive lock and fsynced before the server answers; a revision is a new line (the latest
  counts, the history stays). A line cut by a crash has no newline: the reader skips it, and the next
  append starts a new line first, so a crash loses at most the submission being written.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import random
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from numbers import Integral
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from giant_assets.core.files import atomic_write_bytes
from giant_assets.core.paths import confined_path
from giant_assets.geometry.boxes import level0_box_problem
from giant_assets.multipathqa.prompts import asked_question
from giant_assets.runs.extraction import PANDA
from giant_assets.runs.records import parse_trajectory
from giant_assets.runs.viewed import viewed_steps

REGION_RATINGS = ("relevant", "partly", "not relevant")
ANSWER_RATINGS = ("correct", "partly", "wrong")
SUPPORT_RATINGS = ("yes", "partly", "no")
MAX_COMMENT = 4000
MAX_DRAWN = 20
REVIEW_FOLDER = "reviews"  # <data>/reviews: the real review
DEMO_REVIEW_FOLDER = "reviews-demo"  # the demo's scripted reviewers, apart from any real reviewer's
DEMO_REVIEWERS = ("demo-a", "demo-b")  # the demo's scripted reviewers (demo/reviewers.py)


class ReviewError(ValueError):
    """A submission or setup that cannot be accepted; the message says which field and why."""


@dataclass(frozen=True)
class ReviewFiles:
    root: Path  # <data>/reviews

    @property
    def reviewers(self) -> Path:
        return self.root / "reviewers.json"

    @property
    def queue(self) -> Path:
        return self.root / "queue.json"

    @property
    def secret_file(self) -> Path:
        return self.root / "secret"

    def submitted(self, reviewer: str) -> Path:
        return confined_path(self.root / "submitted", f"{reviewer}.jsonl")

    def secret(self) -> bytes:
        """The review's secret, created (0600) on first use."""
        if not self.secret_file.exists():
            self.root.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):
                fd = os.open(self.secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(secrets.token_bytes(32))
                    fh.flush()
                    os.fsync(fh.fileno())
        return self.secret_file.read_bytes()


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def add_reviewer(files: ReviewFiles, name: str) -> str:
    """Register ``name`` and return their new token (a second call gives them a new one)."""
    if not name or not name.replace("-", "").replace("_", "").isalnum() or len(name) > 64:
        raise ReviewError(f"reviewer name {name!r}: use letters, digits, '-' and '_' (at most 64)")
    reviewers = load_reviewers(files)
    token = secrets.token_urlsafe(24)
    reviewers[name] = _token_hash(token)
    atomic_write_bytes(files.reviewers, json.dumps({"reviewers": reviewers}, indent=1).encode())
    return token


def load_reviewers(files: ReviewFiles) -> dict[str, str]:
    if not files.reviewers.exists():
        return {}
    return dict(json.loads(files.reviewers.read_text())["reviewers"])


def reviewer_for(files: ReviewFiles, token: str | None) -> str | None:
    """The reviewer whose token this is (compared in constant time), else None."""
    if not token:
        return None
    digest = _token_hash(token)
    found = None
    for name, stored in load_reviewers(files).items():
        if hmac.compare_digest(stored, digest):
            found = name
    return found


# --- the queue -------------------------------------------------------------------------------------


def unit_id(secret: bytes, experiment: str, config_hash: str, benchmark: str, item: str, run: int) -> str:
    key = "\x1f".join([experiment, config_hash, benchmark, item, str(run)]).encode()
    return hmac.new(secret, key, hashlib.sha256).hexdigest()[:20]


def build_units(
    secret: bytes,
    experiment: str,
    predictions: pd.DataFrame,
    items: pd.DataFrame,
    reported: Iterable[Mapping[str, Any]] = (),
    refused: list[str] | None = None,
) -> list[dict[str, Any]]:
    """One unit per run of ``predictions`` (one experiment and benchmark): the blinded view under
    ``shown``, and the experiment, model and truth kept beside it for the metrics.

    The regions shown are the crops the run viewed, or, for a run with ``reported`` regions (a path-review
    run: mappings with ``benchmark_id``, ``run_index``, a level-0 ``box`` and a ``finding``), those. A
    reported region without a usable box (not four finite numbers, no positive size, outside its slide) is
    left out and named in ``refused``, one line each; without ``refused`` the first is a ReviewError."""
    by_item = {(r.benchmark_name, str(r.benchmark_id)): r for r in items.itertuples(index=False)}
    benchmarks = set(predictions["benchmark_name"]) if len(predictions) else set()
    sizes = {
        str(r.benchmark_id): _slide_size(r)
        for r in items.itertuples(index=False)
        if r.benchmark_name in benchmarks
    }
    reported_by_run: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for i, region in enumerate(reported):
        where = f"reported region {i} (item {str(region.get('benchmark_id'))[:40]})"
        run_index = region.get("run_index")
        if isinstance(run_index, bool) or not isinstance(run_index, Integral) or not 0 <= run_index < 10**6:
            problem = f"{where}: run_index must be a run number, got {str(run_index)[:40]!r}"
        else:
            where = f"reported region {i} (item {str(region.get('benchmark_id'))[:40]} run {run_index})"
            box = region.get("box")
            problem = level0_box_problem(box, sizes.get(str(region.get("benchmark_id"))))
            problem = None if problem is None else f"{where}: box: {problem}"
        if problem is not None:
            if refused is None:
                raise ReviewError(problem)
            refused.append(problem)
            continue
        reported_by_run.setdefault((str(region["benchmark_id"]), int(run_index)), []).append(
            {"box": [int(v) for v in box], "step": None, "reason": str(region.get("finding") or "")}
        )
    units = []
    for run in predictions.itertuples(index=False):
        item = by_item.get((run.benchmark_name, str(run.benchmark_id)))
        if item is None:
            raise ReviewError(f"{experiment}: item {run.benchmark_name}/{run.benchmark_id} not in the items")
        steps = parse_trajectory(run.trajectory_json)
        regions = [  # the regions a reviewer rates (runs.viewed); a thumbnail (the whole slide) is none
            {"box": [int(v) for v in s["box"]], "step": int(s["index"]), "reason": str(s.get("text") or "")}
            for s in viewed_steps(steps)
        ]
        regions = reported_by_run.get((str(run.benchmark_id), int(run.run_index)), regions)
        units.append(
            {
                "unit": unit_id(
                    secret,
                    experiment,
                    run.config_hash,
                    run.benchmark_name,
                    str(run.benchmark_id),
                    run.run_index,
                ),
                "experiment": experiment,
                "config_hash": run.config_hash,
                "model": getattr(run, "model", ""),
                "agent": getattr(run, "agent", ""),
                "benchmark_name": run.benchmark_name,
                "benchmark_id": str(run.benchmark_id),
                "run_index": int(run.run_index),
                "truth_label": int(run.truth_label),
                "correct": bool(run.correct),
                "wsi_path": str(item.wsi_path or ""),
                "shown": {
                    "question": _question(item),
                    "options": _options(item),
                    "answer": _answer_shown(run, _options(item)),
                    "raw_answer": str(run.answer_text),
                    "regions": regions,
                    "slide_size": _slide_size(item),
                },
            }
        )
    return units


def _options(item: Any) -> list[str]:
    options = getattr(item, "options", None)
    return [str(o) for o in options] if isinstance(options, (list, tuple, np.ndarray)) else []


def _question(item: Any) -> str:
    """The question as the dataset asks it (no answer format the platform appended), else the prompt."""
    template = getattr(item, "prompt_template", None)
    return asked_question(template) if isinstance(template, str) and template.strip() else str(item.prompt)


def _answer_shown(run: Any, options: list[str]) -> str:
    """The agent's answer as a reader checks it: the chosen option's text (``2. Liver``), a PANDA grade
    (``ISUP grade 3``), else the reply as it came."""
    label = getattr(run, "predicted_label", None)
    if isinstance(label, Integral | float) and not isinstance(label, bool) and pd.notna(label):
        if options and float(label).is_integer() and 1 <= label <= len(options):
            return f"{int(label)}. {options[int(label) - 1]}"
        if not options and run.benchmark_name == PANDA and float(label).is_integer():
            return f"ISUP grade {int(label)}"
    return str(run.answer_text)


def left_out_reason(unit: Mapping[str, Any]) -> str | None:
    """Why ``unit`` cannot be reviewed (its slide file is missing, it has no answer, no region to rate),
    or None when it can."""
    path = unit.get("wsi_path") or ""
    if not path or not Path(path).exists():  # a file, or a DICOM-WSI folder
        return "no slide file"
    if not str(unit["shown"].get("answer") or "").strip():
        return "no answer"
    if not unit["shown"].get("regions"):
        return "no region to rate"
    return None


def _slide_size(item: Any) -> list[int] | None:
    """An item's level-0 slide size [width, height], or None when the items do not know it."""
    width, height = getattr(item, "width", None), getattr(item, "height", None)
    return [int(width), int(height)] if pd.notna(width) and pd.notna(height) else None


def write_queue(files: ReviewFiles, units: Iterable[Mapping[str, Any]]) -> int:
    """Add ``units`` to the queue (a unit already there is replaced); returns the queue's length."""
    queue = {u["unit"]: u for u in load_queue(files)}
    queue |= {u["unit"]: dict(u) for u in units}
    atomic_write_bytes(files.queue, json.dumps({"units": list(queue.values())}, indent=1).encode("utf-8"))
    return len(queue)


def load_queue(files: ReviewFiles) -> list[dict[str, Any]]:
    if not files.queue.exists():
        return []
    return list(json.loads(files.queue.read_text(encoding="utf-8"))["units"])


def reviewable_queue(files: ReviewFiles) -> list[dict[str, Any]]:
    """The queue's units a reviewer can review now (``left_out_reason``: e.g. a slide since removed)."""
    return [u for u in load_queue(files) if left_out_reason(u) is None]


def order_for(files: ReviewFiles, reviewer: str, units: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The reviewer's own random order of the units (fixed per reviewer, different between them)."""
    seed = hmac.new(files.secret(), reviewer.encode(), hashlib.sha256).digest()
    ordered = sorted(units, key=lambda u: u["unit"])
    random.Random(seed).shuffle(ordered)
    return ordered


def blinded(unit: Mapping[str, Any]) -> dict[str, Any]:
    """What a reviewer sees of a unit: its opaque id and ``shown``; nothing that names its source."""
    return {"unit": unit["unit"], **unit["shown"]}


# --- submissions -----------------------------------------------------------------------------------


def validate_review(unit: Mapping[str, Any], body: Any) -> dict[str, Any]:
    """The submission as stored, or ReviewError naming the field."""
    if not isinstance(body, dict):
        raise ReviewError("the review must be a JSON object")
    n_regions = len(unit["shown"]["regions"])
    regions = body.get("regions", [])
    if not isinstance(regions, list) or len(regions) != n_regions:
        raise ReviewError(f"field 'regions': one rating per region ({n_regions}), in order")
    for i, rating in enumerate(regions):
        if rating not in (*REGION_RATINGS, None):
            raise ReviewError(
                f"field 'regions[{i}]': expected one of {REGION_RATINGS} or null, got {rating!r}"
            )
    answer, supports = body.get("answer"), body.get("supports")
    if answer not in (*ANSWER_RATINGS, None):
        raise ReviewError(f"field 'answer': expected one of {ANSWER_RATINGS} or null, got {answer!r}")
    if supports not in (*SUPPORT_RATINGS, None):
        raise ReviewError(f"field 'supports': expected one of {SUPPORT_RATINGS} or null, got {supports!r}")
    drawn = body.get("drawn", [])
    size = unit["shown"].get("slide_size")
    if not isinstance(drawn, list) or len(drawn) > MAX_DRAWN:
        raise ReviewError(f"field 'drawn': a list of at most {MAX_DRAWN} boxes [x, y, w, h]")
    for i, box in enumerate(drawn):
        problem = level0_box_problem(box, size)
        if problem is not None:
            raise ReviewError(f"field 'drawn[{i}]': {problem}")
    comment = body.get("comment", "")
    if not isinstance(comment, str) or len(comment) > MAX_COMMENT:
        raise ReviewError(f"field 'comment': text of at most {MAX_COMMENT} characters")
    return {
        "regions": regions,
        "answer": answer,
        "supports": supports,
        "drawn": [[float(v) for v in b] for b in drawn],
        "comment": comment,
    }


def append_review(files: ReviewFiles, reviewer: str, unit: str, review: Mapping[str, Any]) -> dict:
    """Store one submission durably (see the module docstring); returns the stored record."""
    record = {
        "reviewer": reviewer,
        "unit": unit,
        "submitted_at": datetime.now(UTC).isoformat(timespec="microseconds"),
        **review,
    }
    line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
    path = files.submitted(reviewer)
    path.parent.mkdir(parents=True, exist_ok=True)
    created = not path.exists()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line  # a line cut by a crash stays on its own line, skipped by the reader
        view = memoryview(line)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return record


def read_reviews(files: ReviewFiles) -> tuple[list[dict[str, Any]], int]:
    """Every stored submission of every reviewer in file order, and how many lines were skipped: cut by a
    crash, or not a submission at all (no object naming its reviewer, unit and time)."""
    records, skipped = [], 0
    folder = files.root / "submitted"
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        for raw in path.read_bytes().split(b"\n"):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except (ValueError, RecursionError):  # cut, not UTF-8, a 5,000-digit integer, nested too deep
                skipped += 1
                continue
            keys = ("reviewer", "unit", "submitted_at")
            if isinstance(record, dict) and all(isinstance(record.get(k), str) for k in keys):
                records.append(record)
            else:
                skipped += 1
    return records, skipped


def demo_comment(reviewer: str) -> str:
    """The comment every review of a scripted demo reviewer carries, now and before the demo's own
    folder existed (how one is told from a pathologist's)."""
    return f"scripted demo reviewer {reviewer}"


def is_demo_review(record: Mapping[str, Any]) -> bool:
    """A submission written by the demo's scripted reviewers (their name and their comment)."""
    reviewer = record.get("reviewer")
    return reviewer in DEMO_REVIEWERS and record.get("comment") == demo_comment(str(reviewer))


def demo_files(files: ReviewFiles, records: Iterable[Mapping[str, Any]]) -> list[Path]:
    """The files of the demo's scripted reviewers among ``records`` (``read_reviews`` of ``files``): in the
    real review's folder, left by a demo from before they had their own (``DEMO_REVIEW_FOLDER``)."""
    return [
        files.submitted(name) for name in sorted({str(r["reviewer"]) for r in records if is_demo_review(r)})
    ]


def old_demo_note(files: ReviewFiles) -> str | None:
    """One line saying the real review's folder still holds the demo's scripted reviews (what to do), or
    None when it holds none."""
    found = demo_files(files, read_reviews(files)[0])
    if not found:
        return None
    return (
        f"note: {' and '.join(map(str, found))} hold the demo's scripted reviews from a demo before they "
        f"moved to {DEMO_REVIEW_FOLDER}/: pathologist_reviews leaves them out; delete them to keep them out"
    )


def latest_reviews(records: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """(reviewer, unit) -> the last submission: a revision replaces what counts, the history stays."""
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for record in records:
        latest[(record["reviewer"], record["unit"])] = record
    return latest
