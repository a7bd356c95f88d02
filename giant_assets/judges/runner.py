"""Run code_judge executables as subprocesses (no shell) and grade batches of cases with them.

`run_judge` sends one payload as JSON on stdin and validates the verdict on stdout; every way a judge can
fail raises a specific JudgeError. `run_judge_on_cases` grades a directory of case *.json files or a
JSONL file and returns one DataFrame row per case (a failing case is its own row with `error` set).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

Command = Sequence[str] | str | Path
STDERR_TAIL_BYTES = 4096
_READ_CHUNK = 65536
RESULT_COLUMNS = ["case_id", "score", "hits", "misses", "reasoning", "error", "duration_s"]


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


def judge_argv(command: Command) -> list[str]:
    """argv for a judge: a .py file runs with this Python, another existing file runs directly, a string
    that is not a file is split like a shell command line (no shell is used), a sequence is taken as is."""
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
    exe = shutil.which(argv[0])
    if exe is None:
        raise JudgeNotFoundError(f"judge command not found: {argv[0]!r}")
    return [exe, *argv[1:]]


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _feed(proc: subprocess.Popen, data: bytes) -> None:
    try:
        proc.stdin.write(data)
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass  # the judge exited or closed stdin without reading everything


def _read_capped(proc: subprocess.Popen, sink: bytearray, cap: int, over: threading.Event) -> None:
    while chunk := proc.stdout.read1(_READ_CHUNK):
        sink.extend(chunk)
        if len(sink) > cap:
            over.set()
            _kill_group(proc)
            return


def _read_tail(stream: Any, tail: collections.deque) -> None:
    while chunk := stream.read1(_READ_CHUNK):
        tail.append(chunk)
        while sum(map(len, tail)) > 2 * STDERR_TAIL_BYTES and len(tail) > 1:
            tail.popleft()


def _stderr_tail(tail: collections.deque, lines: int = 10) -> str:
    text = b"".join(tail)[-STDERR_TAIL_BYTES:].decode("utf-8", errors="replace")
    return "\n".join(text.strip().splitlines()[-lines:]) or "(no stderr)"


def parse_verdict(stdout: bytes) -> tuple[float, list[str], list[str], str]:
    """Validate a judge's stdout: one JSON object with score in [0, 1], hits and misses lists of strings,
    and an optional reasoning string (the spec's own example judge omits it on missing data)."""
    text = stdout.decode("utf-8", errors="replace").strip()
    if not text:
        raise JudgeOutputError("judge wrote nothing to stdout")
    try:
        verdict = json.loads(text)
    except json.JSONDecodeError as exc:
        raise JudgeOutputError(f"judge output is not JSON ({exc}): {text[:200]!r}") from exc
    if not isinstance(verdict, dict):
        raise JudgeOutputError(f"judge output must be a JSON object, got {type(verdict).__name__}")
    missing = [f for f in ("score", "hits", "misses") if f not in verdict]
    if missing:
        raise JudgeOutputError(f"judge output is missing field(s) {missing}: {text[:200]!r}")
    score = verdict["score"]
    if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
        raise JudgeOutputError(f"judge output field 'score' must be a finite number, got {score!r}")
    if not 0.0 <= score <= 1.0:
        raise JudgeOutputError(f"judge output field 'score' is {score}, outside [0, 1]")
    for name in ("hits", "misses"):
        value = verdict[name]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise JudgeOutputError(f"judge output field {name!r} must be a list of strings: {value!r:.99}")
    reasoning = verdict.get("reasoning", "")
    if not isinstance(reasoning, str):
        raise JudgeOutputError(f"judge output field 'reasoning' must be a string, got {reasoning!r:.200}")
    return float(score), verdict["hits"], verdict["misses"], reasoning


def run_judge(
    command: Command, payload: dict[str, Any], timeout_s: float = 30, max_output_bytes: int = 1_000_000
) -> JudgeResult:
    """Run one judge on one payload (JSON on stdin) and return its validated verdict.

    The judge runs in its own process group; on timeout or oversized output the whole group is killed.
    """
    argv = judge_argv(command)
    data = json.dumps(payload).encode()
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        raise JudgeNotFoundError(f"cannot start judge {argv}: {exc}") from exc
    out, err_tail, over = bytearray(), collections.deque(), threading.Event()
    threads = [
        threading.Thread(target=_feed, args=(proc, data), daemon=True),
        threading.Thread(target=_read_capped, args=(proc, out, max_output_bytes, over), daemon=True),
        threading.Thread(target=_read_tail, args=(proc.stderr, err_tail), daemon=True),
    ]
    for t in threads:
        t.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        proc.wait()
    for t in threads:
        t.join(timeout=max(0.0, timeout_s - (time.monotonic() - start)) + 1.0)
    if any(t.is_alive() for t in threads):  # a leftover child of the judge still holds a pipe open
        _kill_group(proc)
        for t in threads:
            t.join(timeout=5.0)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        stream.close()
    duration = time.monotonic() - start
    if over.is_set():
        raise JudgeOutputError(f"judge output exceeds {max_output_bytes} bytes; judge killed")
    if timed_out:
        raise JudgeTimeoutError(f"judge timed out after {timeout_s:g} s and was killed")
    if proc.returncode != 0:
        how = (
            f"was killed by signal {-proc.returncode}"
            if proc.returncode < 0
            else f"exited with code {proc.returncode}"
        )
        raise JudgeCrashError(f"judge {how}; stderr tail:\n{_stderr_tail(err_tail)}")
    score, hits, misses, reasoning = parse_verdict(bytes(out))
    return JudgeResult(score, hits, misses, reasoning, duration)


def load_cases(path: str | Path) -> list[tuple[str, dict[str, Any] | str]]:
    """(case_id, payload) pairs from a directory of *.json files (id = file stem) or a .jsonl file (id =
    the case's "id" field, else line-N). A case that cannot be read comes back as (case_id, error message)."""
    path = Path(path)
    if path.is_dir():
        entries = [(f.stem, f.read_text(), f"{f}") for f in sorted(path.glob("*.json"))]
    elif path.is_file():
        entries = [
            (f"line-{n}", line, f"{path}: line {n}")
            for n, line in enumerate(path.read_text().splitlines(), start=1)
            if line.strip()
        ]
    else:
        raise FileNotFoundError(f"cases path {path} is neither a directory nor a file")
    cases: list[tuple[str, dict[str, Any] | str]] = []
    for case_id, text, where in entries:
        try:
            payload = json.loads(text)
        except json.JSONDecodeError as exc:
            cases.append((case_id, f"{where}: invalid JSON: {exc}"))
            continue
        if not isinstance(payload, dict):
            cases.append((case_id, f"{where}: a case must be a JSON object, got {type(payload).__name__}"))
            continue
        if path.is_file() and payload.get("id") is not None:
            case_id = str(payload["id"])
        cases.append((case_id, payload))
    return cases


def run_judge_on_cases(
    command: Command,
    cases: str | Path,
    *,
    timeout_s: float = 30,
    max_output_bytes: int = 1_000_000,
    workers: int = 1,
) -> pd.DataFrame:
    """Grade every case with the judge; columns case_id, score, hits, misses, reasoning, error, duration_s.

    A case whose file is unreadable or whose judge run fails gets score NaN and the error message.
    Raises JudgeNotFoundError up front if the judge command cannot be resolved.
    """
    judge_argv(command)
    loaded = load_cases(cases)

    def grade(case: tuple[str, dict[str, Any] | str]) -> dict[str, Any]:
        case_id, payload = case
        row = dict(
            case_id=case_id, score=math.nan, hits=[], misses=[], reasoning="", error=None, duration_s=math.nan
        )
        if isinstance(payload, str):
            return row | {"error": payload}
        try:
            res = run_judge(command, payload, timeout_s=timeout_s, max_output_bytes=max_output_bytes)
        except JudgeError as exc:
            return row | {"error": f"{type(exc).__name__}: {exc}"}
        return row | {
            "score": res.score,
            "hits": res.hits,
            "misses": res.misses,
            "reasoning": res.reasoning,
            "duration_s": res.duration_s,
        }

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        rows = list(pool.map(grade, loaded))
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def main(argv: Sequence[str] | None = None) -> int:
    """giant-judge-run: grade cases with a judge, print a summary; exit 1 if any case errored."""
    parser = argparse.ArgumentParser(prog="giant-judge-run", description=main.__doc__)
    parser.add_argument("judge", help="judge command (e.g. giant-judge-iou) or path to a judge script")
    parser.add_argument("cases", type=Path, help="directory of case *.json files, or a .jsonl file")
    parser.add_argument("--out", type=Path, help="write one JSON result per case to this JSONL file")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per case (default 30)")
    parser.add_argument("--max-output-bytes", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=1, help="judges run in parallel (default 1)")
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
