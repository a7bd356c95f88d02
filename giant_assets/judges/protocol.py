"""The code_judge protocol, in one place: one JSON object in on stdin, one verdict object out on stdout.

Input: {"candidate_answer": ..., "reference_answer": ..., "config": {...} (optional)}; an answer is an
object or a string holding a JSON object. Output: {"score": float in [0, 1], "hits": [str],
"misses": [str], "reasoning": str}. Malformed input is a verdict (score 0, the problem as a miss, exit
code 0); stdin that is not JSON at all exits with code 2 and a message on stderr.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from giant_assets.geometry.boxes import as_boxes, xywh_to_xyxy

BOX_FORMATS = ("xyxy", "xywh")
EXIT_INVALID_JSON = 2


class JudgeInputError(ValueError):
    """The payload is JSON but not usable by the judge; becomes a score-0 verdict."""


@dataclass(frozen=True)
class Verdict:
    score: float
    hits: list[str] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)
    reasoning: str = ""

    def to_dict(self) -> dict[str, Any]:
        if not (math.isfinite(self.score) and 0.0 <= self.score <= 1.0):
            raise ValueError(f"judge produced score {self.score!r} outside [0, 1]")
        return asdict(self) | {"score": float(self.score)}


Judge = Callable[[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]], Verdict]


def _answer(payload: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    if key not in payload:
        raise JudgeInputError(f"missing {key!r}")
    value = payload[key]
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise JudgeInputError(f"{key}: a string answer must hold a JSON object ({exc})") from exc
    if not isinstance(value, Mapping):
        raise JudgeInputError(f"{key}: expected an object, got {type(value).__name__}")
    return value


def evaluate_payload(judge: Judge, raw: bytes | str) -> dict[str, Any]:
    """Run `judge` on a raw stdin payload and return the verdict dict.

    Raises json.JSONDecodeError for non-JSON input; any other problem with the input is a score-0 verdict.
    """
    payload = json.loads(raw)
    try:
        if not isinstance(payload, Mapping):
            raise JudgeInputError(f"the payload must be a JSON object, got {type(payload).__name__}")
        config = payload.get("config") or {}
        if not isinstance(config, Mapping):
            raise JudgeInputError(f"config: expected an object, got {type(config).__name__}")
        verdict = judge(_answer(payload, "candidate_answer"), _answer(payload, "reference_answer"), config)
        return verdict.to_dict()  # raises ValueError on a non-finite score (e.g. from overflowing input)
    except ValueError as exc:  # JudgeInputError and the geometry library's input validation errors
        return Verdict(0.0, [], [f"Malformed input: {exc}"], f"Could not evaluate: {exc}").to_dict()


def serve(judge: Judge) -> None:
    """Console entry point body: read stdin, write the verdict JSON line to stdout."""
    raw = sys.stdin.buffer.read()
    try:
        verdict = evaluate_payload(judge, raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        print(f"invalid JSON on stdin: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_INVALID_JSON) from None
    sys.stdout.write(json.dumps(verdict, allow_nan=False) + "\n")
    sys.stdout.flush()


def pick(answer: Mapping[str, Any], names: Sequence[str], what: str) -> Any:
    """The value of the first of `names` present (and not null) in `answer`."""
    for name in names:
        if answer.get(name) is not None:
            return answer[name]
    raise JudgeInputError(f"{what}: missing field, expected one of {list(names)}")


def config_number(config: Mapping[str, Any], name: str, default: float, low: float, high: float) -> float:
    """config[name] as a float in [low, high] (default if absent)."""
    value = config.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise JudgeInputError(f"config.{name}: expected a number in [{low}, {high}], got {value!r}")
    return float(value)


def config_choice(config: Mapping[str, Any], name: str, default: str, choices: Sequence[str]) -> str:
    """config[name] as one of `choices` (default if absent)."""
    value = config.get(name, default)
    if value not in choices:
        raise JudgeInputError(f"config.{name}: expected one of {list(choices)}, got {value!r}")
    return str(value)


def boxes_xyxy(value: Any, what: str, config: Mapping[str, Any]) -> np.ndarray:
    """Boxes (one [4 numbers] or a list of them) as XYXY (N, 4); config.format says "xyxy" or "xywh"."""
    fmt = config_choice(config, "format", "xyxy", BOX_FORMATS)
    arr = as_boxes(value, f"{what} ({fmt})")
    return xywh_to_xyxy(arr) if fmt == "xywh" else arr
