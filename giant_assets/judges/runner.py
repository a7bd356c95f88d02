"""Run code_judge executables as subprocesses (no shell) and grade batches of cases with them.

`run_judge` sends one payload as JSON on stdin and validates the verdict on stdout; every way a judge can
fail raises a specific JudgeError. `run_judge_on_cases` grades a directory of case *.json files or a
JSONL file and returns one DataFrame row per case: a case that cannot be read (not UTF-8, not JSON,
nested deeper than ``safe_json.MAX_JSON_DEPTH``, larger than ``MAX_CASE_BYTES``) or whose judge fails
is its own row with `error` set, never the loss of the batch.

Judges are named by a path (a .py file runs with this Python), a bundled judge name (``giant-judge-iou``
and friends run as ``python -m giant_assets.judges.<module>`` with this Python, so the venv need not be
on PATH), or a command line resolved on PATH.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from giant_assets.judges.process import run_process
from giant_assets.judges.protocol import MAX_INPUT_BYTES
from giant_assets.judges.safe_json import JsonLimitError, loads

Command = Sequence[str] | str | Path
STDERR_TAIL_BYTES = 4096
MAX_CASE_BYTES = MAX_INPUT_BYTES
RESULT_COLUMNS = ["case_id", "score", "pass", "hits", "misses", "reasoning", "error", "duration_s"]
BUNDLED_JUDGES = {
    "giant-judge-iou": "giant_assets.judges.bbox_iou",
    "giant-judge-match": "giant_assets.judges.bbox_match",
    "giant-judge-distance": "giant_assets.judges.distance",
    "giant-judge-polygon": "giant_assets.judges.polygon_iou",
    "giant-judge-map": "giant_assets.judges.coco_map",
    "giant-judge-rotated-iou": "giant_assets.judges.rotated_iou",
}


class JudgeError(RuntimeError):
    """A judge could not produce a valid verdict."""


class JudgeNotFoundError(JudgeError):
    """The judge command or file does not exist or cannot be executed."""


class JudgeTimeoutError(JudgeError):
    """The judge ran longer than the timeout and was killed."""


class JudgeCrashError(JudgeError):
    """The judge exited with a non-zero code (or was killed by a signal)."""


class JudgeOutputError(JudgeError):
    """The judge's stdout is too large, not JSON, or not a valid verdict."""


@dataclass(frozen=True)
class JudgeResult:
    score: float
    hits: list[str]
    misses: list[str]
    reasoning: str
    duration_s: float
    passed: bool | None = None  # the judge's own `pass`, None if it gives none


def judge_argv(command: Command) -> list[str]:
    """argv for a judge: a .py file runs with this Python, another existing file runs directly, a bundled
    judge name runs its module with this Python, any other string is split like a shell command line (no
    shell is used) and resolved on PATH, a sequence is taken as is (its first item resolved likewise)."""
    if isinstance(command, str | Path) and Path(command).is_file():
        path = Path(command)
        if path.suffix == ".py":
            return [sys.executable, str(path)]
        if not os.access(path, os.X_OK):
            raise JudgeNotFoundError(f"judge file {path} is not executable (chmod +x, or use a .py file)")
        return [str(path.resolve())]
    argv = shlex.split(str(command)) if isinstance(command, str | Path) else [str(c) for c in command]
    if not argv:
        raise JudgeNotFoundError("empty judge command")
    if argv[0] in BUNDLED_JUDGES:
        return [sys.executable, "-m", BUNDLED_JUDGES[argv[0]], *argv[1:]]
    exe = shutil.which(argv[0])
    if exe is None:
        raise JudgeNotFoundError(
            f"judge command not found: {argv[0]!r} (bundled judges: {', '.join(BUNDLED_JUDGES)})"
        )
    return [exe, *argv[1:]]


def _stderr_tail(tail: bytes, lines: int = 10) -> str:
    text = tail[-STDERR_TAIL_BYTES:].decode("utf-8", errors="replace")
    return "\n".join(text.strip().splitlines()[-lines:]) or "(no stderr)"


def _string_list(verdict: dict, name: str, text: str) -> list[str]:
    value = verdict[name]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise JudgeOutputError(f"judge output field {name!r} must be a list of strings: {value!r:.99}")
    return value


def _checks(verdict: dict) -> tuple[list[str], list[str]]:
    """AgentV's ``checks`` ([{text, pass, ...}]) as (hits, misses)."""
    checks = verdict.get("checks") or []
    if not isinstance(checks, list) or not all(
        isinstance(c, dict) and isinstance(c.get("text"), str) and isinstance(c.get("pass"), bool)
        for c in checks
    ):
        raise JudgeOutputError(
            f"judge output field 'checks' must be a list of {{text, pass}} objects: {checks!r:.99}"
        )
    return [c["text"] for c in checks if c["pass"]], [c["text"] for c in checks if not c["pass"]]


def parse_verdict(stdout: bytes) -> tuple[float, list[str], list[str], str, bool | None]:
    """Validate a judge's stdout: one JSON object with a score in [0, 1] and either the spec's ``hits``
    and ``misses`` (lists of strings, optional ``reasoning``) or AgentV's ``pass`` / ``reason`` /
    ``checks``. Returns (score, hits, misses, reasoning, pass or None)."""
    text = stdout.decode("utf-8", errors="replace").strip()
    if not text:
        raise JudgeOutputError("judge wrote nothing to stdout")
    try:
        verdict = loads(text, "judge output")
    except JsonLimitError as exc:
        raise JudgeOutputError(f"judge output is not JSON ({exc}): {text[:200]!r}") from None
    if not isinstance(verdict, dict):
        raise JudgeOutputError(f"judge output must be a JSON object, got {type(verdict).__name__}")
    spec_form = "hits" in verdict or "misses" in verdict
    agentv_form = any(k in verdict for k in ("pass", "checks", "reason"))
    missing = (
        [f for f in ("score", "hits", "misses") if f not in verdict] if spec_form or not agentv_form else []
    )
    if "score" not in verdict and "score" not in missing:
        missing.append("score")
    if missing:
        raise JudgeOutputError(
            f"judge output is missing field(s) {missing} (or AgentV's pass/reason/checks): {text[:200]!r}"
        )
    score = verdict["score"]
    if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
        raise JudgeOutputError(f"judge output field 'score' must be a finite number, got {score!r:.99}")
    if not 0.0 <= score <= 1.0:
        raise JudgeOutputError(f"judge output field 'score' is {score}, outside [0, 1]")
    if spec_form:
        hits, misses = _string_list(verdict, "hits", text), _string_list(verdict, "misses", text)
    else:
        hits, misses = _checks(verdict)
    reasoning = verdict.get("reasoning", verdict.get("reason", ""))
    if not isinstance(reasoning, str):
        raise JudgeOutputError(f"judge output field 'reasoning' must be a string, got {reasoning!r:.200}")
    passed = verdict.get("pass")
    if passed is not None and not isinstance(passed, bool):
        raise JudgeOutputError(f"judge output field 'pass' must be true or false, got {passed!r:.99}")
    return float(score), hits, misses, reasoning, passed


def run_judge(
    command: Command, payload: dict[str, Any], timeout_s: float = 30, max_output_bytes: int = 1_000_000
) -> JudgeResult:
    """Run one judge on one payload (JSON on stdin) and return its validated verdict.

    Never waits past ``timeout_s``; on timeout or oversized output the judge's group, session and any
    process still holding its pipes are killed (see ``process.run_process``).
    """
    if not (timeout_s > 0 and math.isfinite(timeout_s)):
        raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
    if max_output_bytes <= 0:
        raise ValueError(f"max_output_bytes must be positive, got {max_output_bytes!r}")
    argv = judge_argv(command)
    try:
        outcome = run_process(argv, json.dumps(payload).encode(), timeout_s, max_output_bytes)
    except OSError as exc:
        raise JudgeNotFoundError(f"cannot start judge {argv}: {exc}") from exc
    if outcome.output_over_cap:
        raise JudgeOutputError(f"judge output exceeds {max_output_bytes} bytes; judge killed")
    if outcome.timed_out:
        raise JudgeTimeoutError(f"judge timed out after {timeout_s:g} s and was killed")
    code = outcome.returncode
    if code != 0:
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        raise JudgeCrashError(f"judge {how}; stderr tail:\n{_stderr_tail(outcome.stderr_tail)}")
    score, hits, misses, reasoning, passed = parse_verdict(outcome.stdout)
    return JudgeResult(score, hits, misses, reasoning, outcome.duration_s, passed)


Case = tuple[str, dict[str, Any] | str]


def _case(case_id: str, raw: bytes | None, where: str, use_id_field: bool) -> Case:
    """One case from its raw bytes; any problem becomes the case's error message."""
    if raw is None:
        return case_id, f"{where}: larger than {MAX_CASE_BYTES:,} bytes; skipped"
    try:
        payload = loads(raw, where)
    except JsonLimitError as exc:
        return case_id, str(exc).replace("not valid JSON", "invalid JSON", 1)
    if not isinstance(payload, dict):
        return case_id, f"{where}: a case must be a JSON object, got {type(payload).__name__}"
    if use_id_field and payload.get("id") is not None:
        case_id = str(payload["id"])
    return case_id, payload


def _read_capped(path: Path) -> bytes | None:
    with path.open("rb") as fh:
        raw = fh.read(MAX_CASE_BYTES + 1)
    return None if len(raw) > MAX_CASE_BYTES else raw


def _jsonl_lines(path: Path) -> Iterator[tuple[int, bytes | None]]:
    """(line number, bytes or None when over MAX_CASE_BYTES) for each non-blank line, bounded memory."""
    with path.open("rb") as fh:
        number = 0
        while True:
            line = fh.readline(MAX_CASE_BYTES + 1)
            if not line:
                return
            number += 1
            if len(line) > MAX_CASE_BYTES and not line.endswith(b"\n"):
                while (rest := fh.readline(1 << 20)) and not rest.endswith(b"\n"):
                    pass
                yield number, None
            elif line.strip():
                yield number, line


def load_cases(path: str | Path) -> list[Case]:
    """(case_id, payload) pairs from a directory of *.json files (id = file stem) or a .jsonl file (id =
    the case's "id" field, else line-N). A case that cannot be read comes back as (case_id, error)."""
    path = Path(path)
    if path.is_dir():
        cases = []
        for f in sorted(path.glob("*.json")):
            try:
                cases.append(_case(f.stem, _read_capped(f), str(f), use_id_field=False))
            except OSError as exc:
                cases.append((f.stem, f"{f}: cannot read: {exc.strerror or exc}"))
        return cases
    if path.is_file():
        return [_case(f"line-{n}", raw, f"{path}: line {n}", True) for n, raw in _jsonl_lines(path)]
    raise FileNotFoundError(f"cases path {path} is neither a directory nor a file")


def run_judge_on_cases(
    command: Command,
    cases: str | Path,
    *,
    timeout_s: float = 30,
    max_output_bytes: int = 1_000_000,
    workers: int = 1,
) -> pd.DataFrame:
    """Grade every case with the judge; columns case_id, score, pass, hits, misses, reasoning, error,
    duration_s. A case whose file is unreadable or whose judge run fails gets score NaN and the error.
    Raises JudgeNotFoundError up front if the judge command cannot be resolved."""
    judge_argv(command)
    loaded = load_cases(cases)

    def grade(case: Case) -> dict[str, Any]:
        case_id, payload = case
        row = dict(
            case_id=case_id, score=math.nan, hits=[], misses=[], reasoning="", error=None, duration_s=math.nan
        )
        row["pass"] = None
        if isinstance(payload, str):
            return row | {"error": payload}
        try:
            res = run_judge(command, payload, timeout_s=timeout_s, max_output_bytes=max_output_bytes)
        except Exception as exc:  # noqa: BLE001 - every case is its own row, whatever went wrong
            return row | {"error": f"{type(exc).__name__}: {exc}"}
        return row | {
            "score": res.score,
            "pass": res.passed,
            "hits": res.hits,
            "misses": res.misses,
            "reasoning": res.reasoning,
            "duration_s": res.duration_s,
        }

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        rows = list(pool.map(grade, loaded))
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def _positive(kind: type) -> Any:
    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a positive {kind.__name__}, got {text!r}") from None
        if not (value > 0 and math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
        return value

    return parse


def main(argv: Sequence[str] | None = None) -> int:
    """giant-judge-run: grade cases with a judge, print a summary; exit 1 if any case errored."""
    parser = argparse.ArgumentParser(prog="giant-judge-run", description=main.__doc__)
    parser.add_argument("judge", help="judge command (e.g. giant-judge-iou) or path to a judge script")
    parser.add_argument("cases", type=Path, help="directory of case *.json files, or a .jsonl file")
    parser.add_argument("--out", type=Path, help="write one JSON result per case to this JSONL file")
    parser.add_argument(
        "--timeout", type=_positive(float), default=30.0, help="seconds per case (default 30)"
    )
    parser.add_argument("--max-output-bytes", type=_positive(int), default=1_000_000)
    parser.add_argument(
        "--workers", type=_positive(int), default=1, help="judges run in parallel (default 1)"
    )
    args = parser.parse_args(argv)
    try:
        results = run_judge_on_cases(
            args.judge,
            args.cases,
            timeout_s=args.timeout,
            max_output_bytes=args.max_output_bytes,
            workers=args.workers,
        )
    except (JudgeNotFoundError, FileNotFoundError) as exc:
        print(f"giant-judge-run: {exc}", file=sys.stderr)
        return 2
    if args.out:
        with args.out.open("w") as fh:
            for row in results.to_dict(orient="records"):
                clean = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
                fh.write(json.dumps(clean) + "\n")
    errors = results[results.error.notna()]
    mean = results.score.mean()
    print(
        f"cases: {len(results)}  scored: {len(results) - len(errors)}  errors: {len(errors)}  "
        f"mean score: {'n/a' if math.isnan(mean) else f'{mean:.4f}'}"
    )
    for row in errors.head(5).itertuples():
        print(f"  error in {row.case_id}: {row.error.splitlines()[0]}")
    return 1 if len(errors) else 0


if __name__ == "__main__":
    sys.exit(main())
