"""``giant-grade``: grade a submission file, print a readable report and write it as JSON.

Exit codes: 0 graded (every report valid), 1 invalid submission, 2 usage error (bad arguments, unknown
task, no items table, unreadable task file, missing submission file).

A ``.jsonl`` whose lines are ``{"task_id", "submission_path"}`` is a biomlbench run file: each listed
submission is graded and ``<timestamp>_grading_report.json`` is written to ``--out`` (a folder) or
``<GIANT_DATA_DIR>/grades``, as ``grade_jsonl`` does.

The JSON report goes to ``--out`` when given (anywhere the user names), else to
``<GIANT_DATA_DIR>/grades/<submission stem>__<task>__<UTC time>.json``; the name is sanitised, so a
submission's file name can never place it outside that folder.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

from giant_assets.core.settings import data_dir
from giant_assets.grading.grade import aggregate_reports, grade_file, grade_jsonl
from giant_assets.grading.items import ItemsUnavailableError, project_items, read_items_file
from giant_assets.grading.reader import SubmissionFileError
from giant_assets.grading.render import format_report
from giant_assets.grading.report import TaskReport, write_json
from giant_assets.grading.task_files import TaskDefinitionError, load_task_file
from giant_assets.grading.tasks import TaskRegistry, register_multipathqa_tasks
from giant_assets.judges.safe_json import JsonLimitError, loads

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2
GRADES_DIR = "grades"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]+")


class UsageError(Exception):
    """A problem with how the tool was called (exit code 2)."""


def safe_stem(name: str, max_len: int = 80) -> str:
    """A file-name-safe stem: only ``[A-Za-z0-9_.-]``, no leading dots, never empty."""
    stem = _UNSAFE.sub("_", Path(name).stem).strip("._")[:max_len]
    return stem or "submission"


def default_report_path(root: Path, submission: Path, task: str | None) -> Path:
    """``<root>/grades/<stem>__<task>__<time>.json``, checked to be inside ``<root>/grades``."""
    folder = (root / GRADES_DIR).resolve()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    path = (folder / f"{safe_stem(submission.name)}__{safe_stem(task or 'tasks')}__{stamp}.json").resolve()
    if path.parent != folder:
        raise UsageError(f"refusing to write the report outside {folder}: {path}")
    return path


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="giant-grade",
        description="Grade a submission (CSV 'benchmark_id,prediction' or JSONL) against a task's truth.",
    )
    p.add_argument("submission", type=Path, help="the .csv or .jsonl submission file")
    p.add_argument("--task", help="task id (e.g. gtex); default: from the rows' task_id or '<task>__x.csv'")
    p.add_argument(
        "--items",
        type=Path,
        help="items table (.parquet/.csv) or the MultiPathQA CSV; default: the project's benchmark_items",
    )
    p.add_argument(
        "--task-file",
        type=Path,
        action="append",
        default=[],
        help="YAML/JSON user task description (repeatable)",
    )
    p.add_argument("--out", type=Path, help="where to write the JSON report (default: <data dir>/grades/…)")
    return p


def _build_registry(args: argparse.Namespace) -> TaskRegistry:
    registry = TaskRegistry()
    for path in args.task_file:
        try:
            registry.register(load_task_file(path))
        except (TaskDefinitionError, ValueError) as exc:
            raise UsageError(str(exc)) from None
    if args.task is not None and args.task in registry and args.items is None:
        return registry  # a user task: no need for the MultiPathQA items
    try:
        items = read_items_file(args.items) if args.items else project_items(data_dir())
        register_multipathqa_tasks(items, to=registry)
    except (ItemsUnavailableError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    return registry


def _write_json(path: Path, reports: list[TaskReport]) -> None:
    write_json(path, {"summary": aggregate_reports(reports), "reports": [r.to_dict() for r in reports]})


def _is_manifest(path: Path) -> bool:
    """A biomlbench run file: JSONL whose lines name ``task_id`` and ``submission_path``."""
    if path.suffix.lower() != ".jsonl":
        return False
    with path.open("rb") as fh:
        first = next(
            (line for line in fh if line.strip() and not line.lstrip().startswith((b"#", b"//"))), b""
        )
    try:
        entry = loads(first, "first line")
    except JsonLimitError:
        return False
    return isinstance(entry, dict) and "submission_path" in entry and "task_id" in entry


def _run_manifest(args: argparse.Namespace, registry: TaskRegistry) -> int:
    folder = args.out.expanduser().resolve() if args.out else (data_dir() / GRADES_DIR).resolve()
    try:
        save_path, _ = grade_jsonl(args.submission, folder, registry)
    except (SubmissionFileError, UnicodeDecodeError) as exc:
        print(f"giant-grade: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    summary = json.loads(save_path.read_text(encoding="utf-8"))
    for data in summary["task_reports"]:
        report = TaskReport.from_dict(data)
        print(
            format_report(
                report, registry.get_task(report.task_id).leaderboard if report.task_id in registry else None
            )
        )
        print()
    print(f"Report written to {save_path}")
    return EXIT_OK if summary["total_valid_submissions"] == summary["total_runs"] else EXIT_INVALID


def run(argv: list[str] | None = None) -> int:
    """Parse ``argv``, grade, print and write; returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        if not args.submission.is_file():
            raise UsageError(f"submission file not found: {args.submission}")
        registry = _build_registry(args)
        if args.task is None and _is_manifest(args.submission):
            return _run_manifest(args, registry)
        if args.task is not None and args.task not in registry:
            raise UsageError(f"unknown task {args.task!r}; available: {sorted(t.id for t in registry)}")
        out = (
            args.out.expanduser().resolve()
            if args.out
            else default_report_path(data_dir(), args.submission, args.task)
        )
    except UsageError as exc:
        print(f"giant-grade: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    reports = grade_file(args.submission, registry, task_id=args.task)
    for report in reports:
        board = registry.get_task(report.task_id).leaderboard if report.task_id in registry else None
        print(format_report(report, board))
        print()
    if len(reports) > 1:
        s = aggregate_reports(reports)
        print(
            f"{s['total_valid_submissions']}/{s['total_runs']} valid; medals: gold {s['total_gold_medals']}, "
            f"silver {s['total_silver_medals']}, bronze {s['total_bronze_medals']}"
        )
    _write_json(out, reports)
    print(f"Report written to {out}")
    return EXIT_OK if all(r.valid_submission for r in reports) else EXIT_INVALID


def main() -> None:
    sys.exit(run())


if __name__ == "__main__":
    main()
