"""The code_judge protocol, in one place: one JSON object in on stdin, one verdict object out on stdout.

Input, in either naming (spec 002's, or AgentV's current script-grader payload):

* the candidate: ``candidate_answer`` or ``output``; the reference: ``reference_answer`` or
  ``expected_output``; optional ``config`` (an object). ``input`` and any other field are ignored.
* an answer is an object, or text (the model's raw answer): the JSON object is taken from the text
  (whole text, a fenced block, or the last ``{...}`` in prose; see ``safe_json.extract_json_object``),
  or a list of chat messages (the last one's ``content``, itself an object, text or content parts).
  A missing or null answer is ``{}``, so the judge reports its data as missing, as the spec does.

Output: the spec's ``{score, hits, misses, reasoning}`` plus AgentV's ``{pass, reason, checks}``
(``reason`` = ``reasoning``; ``checks`` = one ``{text, pass}`` per hit and miss).

Malformed or refused input is a verdict (score 0, the problem as a miss, exit code 0); stdin that is not
JSON at all exits with code 2 and a message on stderr. Limits: ``MAX_INPUT_BYTES`` (32 MiB) of stdin,
JSON nesting and answer text as in ``safe_json``, pairwise box work as in ``geometry.boxes.MAX_PAIRS``.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from giant_assets.geometry.boxes import as_boxes, check_xyxy, xywh_to_xyxy
from giant_assets.judges.safe_json import JsonLimitError, NotJsonError, extract_json_object, loads

BOX_FORMATS = ("xyxy", "xywh")
EXIT_INVALID_JSON = 2
MAX_INPUT_BYTES = 32 * 1024 * 1024
CANDIDATE_FIELDS = ("candidate_answer", "output")
REFERENCE_FIELDS = ("reference_answer", "expected_output")


class JudgeInputError(ValueError):
    """The payload is JSON but not usable by the judge; becomes a score-0 verdict."""


@dataclass(frozen=True)
class Verdict:
    score: float
    hits: list[str] = field(default_factory=list)
    misses: list[str] = field(default_factory=list)
    reasoning: str = ""
    passed: bool | None = None  # None: passed when there are hits and no misses

    def to_dict(self) -> dict[str, Any]:
        if not (math.isfinite(self.score) and 0.0 <= self.score <= 1.0):
            raise ValueError(f"judge produced score {self.score!r} outside [0, 1]")
        passed = bool(self.hits) and not self.misses if self.passed is None else self.passed
        checks = [{"text": h, "pass": True} for h in self.hits] + [
            {"text": m, "pass": False} for m in self.misses
        ]
        return {
            "score": float(self.score),
            "hits": list(self.hits),
            "misses": list(self.misses),
            "reasoning": self.reasoning,
            "pass": bool(passed),
            "reason": self.reasoning,
            "checks": checks,
        }


Judge = Callable[[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]], Verdict]


def _message_content(messages: list, key: str) -> Any:
    """The content of the last chat message (AgentV's ``expected_output`` message lists)."""
    last = messages[-1]
    if not isinstance(last, Mapping) or "content" not in last:
        raise JudgeInputError(f"{key}: a list answer must be chat messages with 'content'")
    content = last["content"]
    if isinstance(content, list):  # content parts: [{"type": "text", "value"/"text": ...}, ...]
        texts = [p.get("text", p.get("value")) for p in content if isinstance(p, Mapping)]
        content = "\n".join(t for t in texts if isinstance(t, str))
    return content


def answer_object(payload: Mapping[str, Any], names: Sequence[str]) -> Mapping[str, Any]:
    """The answer under the first present of ``names`` as an object ({} when absent or null)."""
    key = next((n for n in names if payload.get(n) is not None), None)
    if key is None:
        return {}
    value = payload[key]
    if isinstance(value, list) and value:
        value = _message_content(value, key)
    if isinstance(value, str):
        try:
            value = extract_json_object(value, key)
        except JsonLimitError as exc:
            raise JudgeInputError(str(exc)) from None
    if not isinstance(value, Mapping):
        raise JudgeInputError(f"{key}: expected an object (or text holding one), got {type(value).__name__}")
    return value


def _refusal(problem: str) -> dict[str, Any]:
    return Verdict(
        0.0, [], [f"Malformed input: {problem}"], f"Could not evaluate: {problem}", False
    ).to_dict()


def evaluate_payload(judge: Judge, raw: bytes | str) -> dict[str, Any]:
    """Run `judge` on a raw stdin payload and return the verdict dict.

    Raises json.JSONDecodeError for input that is not JSON; any other problem is a score-0 verdict.
    """
    size = len(raw)
    if size > MAX_INPUT_BYTES:
        return _refusal(f"the payload is {size:,} bytes; the limit is {MAX_INPUT_BYTES:,}")
    try:
        payload = loads(raw, "payload")
    except NotJsonError as exc:
        raise json.JSONDecodeError(str(exc), "", 0) from None
    except JsonLimitError as exc:
        return _refusal(str(exc))
    try:
        if not isinstance(payload, Mapping):
            raise JudgeInputError(f"the payload must be a JSON object, got {type(payload).__name__}")
        config = payload.get("config") or {}
        if not isinstance(config, Mapping):
            raise JudgeInputError(f"config: expected an object, got {type(config).__name__}")
        candidate = answer_object(payload, CANDIDATE_FIELDS)
        reference = answer_object(payload, REFERENCE_FIELDS)
        return judge(candidate, reference, config).to_dict()  # to_dict raises ValueError on a bad score
    except ValueError as exc:  # JudgeInputError and the geometry library's input validation errors
        return _refusal(str(exc))


def serve(judge: Judge) -> None:
    """Console entry point body: read stdin (bounded), write the verdict JSON line to stdout."""
    raw = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    try:
        verdict = evaluate_payload(judge, raw)
    except json.JSONDecodeError as exc:
        print(f"invalid JSON on stdin: {exc.msg}", file=sys.stderr)
        raise SystemExit(EXIT_INVALID_JSON) from None
    sys.stdout.write(json.dumps(verdict, allow_nan=False) + "\n")
    sys.stdout.flush()


def first_present(answer: Mapping[str, Any], names: Sequence[str]) -> Any | None:
    """The value of the first of `names` present and not null/empty in `answer`, else None."""
    for name in names:
        value = answer.get(name)
        if value is not None and not (isinstance(value, list | str) and len(value) == 0):
            return value
    return None


def pick(answer: Mapping[str, Any], names: Sequence[str], what: str) -> Any:
    """The value of the first of `names` present (and not null) in `answer`; JudgeInputError if none."""
    for name in names:
        if answer.get(name) is not None:
            return answer[name]
    raise JudgeInputError(f"{what}: missing field, expected one of {list(names)}")


def config_number(config: Mapping[str, Any], name: str, default: float, low: float, high: float) -> float:
    """config[name] as a float in [low, high] (default if absent)."""
    value = config.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise JudgeInputError(f"config.{name}: expected a number in [{low}, {high}], got {value!r:.80}")
    return float(value)


def config_choice(config: Mapping[str, Any], name: str, default: str, choices: Sequence[str]) -> str:
    """config[name] as one of `choices` (default if absent)."""
    value = config.get(name, default)
    if not isinstance(value, str) or value not in choices:
        raise JudgeInputError(f"config.{name}: expected one of {list(choices)}, got {value!r:.80}")
    return value


def boxes_xyxy(value: Any, what: str, config: Mapping[str, Any]) -> np.ndarray:
    """Boxes (one [4 numbers] or a list of them) as XYXY (N, 4); config.format says "xyxy" or "xywh".

    Strings, booleans and inverted boxes are "invalid box" errors, never coerced.
    """
    fmt = config_choice(config, "format", "xyxy", BOX_FORMATS)
    name = f"{what} ({fmt})"
    try:
        if fmt == "xywh":
            return xywh_to_xyxy(value, name)
        return check_xyxy(as_boxes(value, name), name)
    except ValueError as exc:
        message = str(exc)
        raise JudgeInputError(message if "invalid box" in message else f"invalid box: {message}") from None
