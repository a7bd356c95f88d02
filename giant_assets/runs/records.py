"""The one typed record of a finished run, as journalled and stored: fields, dtypes, trajectory parsing.

``RunRecord`` is written once per (result set, benchmark, item, run) to the journal and becomes one row
of ``predictions``; its ``trajectory_json`` holds the agent's steps (``agents.base.Step`` as dicts).
The Parquet dtypes of ``predictions`` and the columns of ``trajectory_steps`` derive from here, and
``trajectory_json`` is parsed only by ``parse_trajectory``.
"""

from __future__ import annotations

import json
import types
import typing
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 3  # 3: item_fingerprint, question_fingerprint, slide_verified

# error_kind values of a record
SLIDE_UNAVAILABLE = "slide_unavailable"
AGENT_ERROR = "agent_error"
TIMEOUT = "timeout"
NO_ANSWER = "no_answer"
MAX_RETRIES_EXCEEDED = "max_retries_exceeded"
# runs whose last attempt failed for a reason worth re-running (retry_failed)
RETRYABLE = frozenset({AGENT_ERROR, TIMEOUT})


class RunWaiting(BaseException):  # noqa: N818 - not an error: the run is waiting, as a cancellation is
    """Raised inside a run that cannot finish now (its model request waits in a provider batch): the
    runner journals nothing for it and counts it as waiting. A ``BaseException`` so that an agent's
    ``except Exception`` cannot turn the wait into a failed run."""


class RunRecord(BaseModel):
    """One finished run of one item: the answer, its label, what it cost, and how it got there."""

    model_config = ConfigDict(extra="ignore")

    config_hash: str = Field(description="result set: hash of the answer-deciding settings")
    agent: str
    model: str = ""
    benchmark_name: str
    benchmark_id: str
    run_index: int = Field(ge=0)
    item_fingerprint: str | None = Field(
        default=None, description="the question about the slide answered (None: journalled before v3)"
    )
    question_fingerprint: str | None = Field(default=None, description="the question alone")
    slide_verified: bool = Field(
        default=True, description="False: answer kept from the journal while its slide could not be read"
    )
    started_at: str | None = None
    answer_text: str = Field(default="", description="the text answer extraction reads")
    predicted_label: int | None = Field(default=None, description="label extracted when the run finished")
    extraction: str | None = Field(default=None, description="which extraction rule gave the label")
    truth_label: int
    correct: bool = False
    error_kind: str | None = None
    error: str | None = None
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    n_steps: int = 0
    n_attempts: int = 0
    response_tagged: bool | None = Field(default=None, description="final reply had <response> tags")
    trajectory_json: str = "[]"
    finished_at: str | None = None
    schema_version: int = SCHEMA_VERSION


_DTYPES = {int: "int64", float: "float64", bool: "bool", str: "object"}


def _dtype(annotation: Any) -> str:
    args = typing.get_args(annotation)
    optional = type(None) in args
    base = next((a for a in args if a is not type(None)), annotation) if args else annotation
    if isinstance(annotation, types.UnionType) or optional:
        return {int: "Int64", float: "float64", bool: "boolean"}.get(base, "object")
    return _DTYPES.get(base, "object")


RECORD_DTYPES: dict[str, str] = {
    name: _dtype(field.annotation) for name, field in RunRecord.model_fields.items()
}


def records_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Journal rows (any schema version) as a typed frame with every ``RunRecord`` column."""
    records = [RunRecord.model_validate(row).model_dump() for row in rows]
    return pd.DataFrame.from_records(records, columns=list(RECORD_DTYPES)).astype(RECORD_DTYPES)


def parse_trajectory(trajectory_json: str | None) -> list[dict[str, Any]]:
    """The steps of one run (dicts with the fields of ``agents.base.Step``); [] when there are none."""
    if not trajectory_json:
        return []
    steps = json.loads(trajectory_json)
    if not isinstance(steps, list):
        raise ValueError(f"trajectory_json must hold a list of steps, got {type(steps).__name__}")
    return steps


RUN_KEY = ["config_hash", "benchmark_name", "benchmark_id", "run_index"]
STEP_COLUMNS: dict[str, str] = {
    "step": "int64",
    "attempt": "Int64",
    "action": "object",
    "box_x": "Int64",
    "box_y": "Int64",
    "box_w": "Int64",
    "box_h": "Int64",
    "level": "Int64",
    "image_w": "Int64",
    "image_h": "Int64",
    "text": "object",
    "input_tokens": "Int64",
    "cached_input_tokens": "Int64",
    "output_tokens": "Int64",
    "cost_usd": "float64",
    "latency_s": "float64",
    "error": "object",
    "image_sha256": "object",  # SHA-256 of each encoded image the step sent, comma-separated; null: none
}


def steps_frame(predictions: pd.DataFrame) -> pd.DataFrame:
    """One row per trajectory step of every run, the requested level-0 box split into columns."""
    keys = [c for c in ("experiment", *RUN_KEY) if c in predictions.columns]
    records = []
    for row in predictions[[*keys, "trajectory_json"]].itertuples(index=False):
        ident = dict(zip(keys, row[:-1], strict=True))
        for step in parse_trajectory(row[-1]):
            box = step.get("box") or [None] * 4
            size = step.get("image_size") or [None, None]
            records.append(
                ident
                | {
                    "step": step["index"],
                    "attempt": step.get("attempt"),
                    "action": step.get("action"),
                    "box_x": box[0],
                    "box_y": box[1],
                    "box_w": box[2],
                    "box_h": box[3],
                    "level": step.get("level"),
                    "image_w": size[0],
                    "image_h": size[1],
                    "text": step.get("text", ""),
                    "input_tokens": step.get("input_tokens", 0),
                    "cached_input_tokens": step.get("cached_input_tokens", 0),
                    "output_tokens": step.get("output_tokens", 0),
                    "cost_usd": step.get("cost_usd", 0.0),
                    "latency_s": step.get("latency_s", 0.0),
                    "error": step.get("error"),
                    "image_sha256": ",".join(step.get("image_sha256") or []) or None,
                }
            )
    columns = {k: ("int64" if k == "run_index" else "object") for k in keys} | STEP_COLUMNS
    return pd.DataFrame.from_records(records, columns=list(columns)).astype(columns)
