"""Agents that need no model, key or network: random, majority-class and replay of recorded answers."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from giant_assets.multipathqa.benchmarks import PANDA_GRADES
from giant_assets.runs.agent_api import AgentAnswer, AgentItem, Step
from giant_assets.runs.records import parse_trajectory

_PANDA = "panda"


def _answer_json(item: AgentItem, label: int) -> str:
    key = "isup_grade" if item.benchmark_name == _PANDA else "answer"
    return json.dumps({key: label})


def _labels(item: AgentItem) -> list[int]:
    """The valid labels of an item: ISUP grades for panda, 1..n for option questions."""
    if item.benchmark_name == _PANDA:
        return list(PANDA_GRADES)
    if not item.options:  # a declared grade question: its grades are open-ended (0..1000)
        raise ValueError(
            f"{item.benchmark_name}/{item.benchmark_id}: a question without options (a declared grade "
            "benchmark) has no fixed label set to draw from; use the majority agent as its baseline"
        )
    return list(range(1, len(item.options) + 1))


class RandomAgent:
    """Uniformly random valid label; the same (seed, item, run) always gives the same answer.

    The draw is seeded per (seed, benchmark, id, run), so results do not depend on concurrency,
    ordering or whether a run was resumed.
    """

    name = "random"
    model = ""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    async def answer(self, item: AgentItem, run_index: int) -> AgentAnswer:
        key = f"{self.seed}\x00{item.benchmark_name}\x00{item.benchmark_id}\x00{run_index}".encode()
        rng = np.random.default_rng(int.from_bytes(hashlib.sha256(key).digest()[:8], "little"))
        labels = _labels(item)
        label = labels[int(rng.integers(len(labels)))]
        text = _answer_json(item, label)
        return AgentAnswer(text=text, steps=[Step(index=0, action="answer", text=text)])

    async def aclose(self) -> None:
        return None


class MajorityAgent:
    """Majority-class baseline: always the most frequent truth label of the benchmark (ties: smallest).

    It reads the evaluated items' own label distribution, so it is a reference floor (its balanced
    accuracy is 1/K by construction), not a fair competitor.
    """

    name = "majority"
    model = ""

    def __init__(self, label_by_benchmark: Mapping[str, int]) -> None:
        self.label_by_benchmark = dict(label_by_benchmark)

    @classmethod
    def from_truth(cls, truth: pd.DataFrame) -> MajorityAgent:
        """From a frame of (benchmark_name, truth_label)."""
        counts = truth.groupby(["benchmark_name", "truth_label"]).size().reset_index(name="n")
        counts = counts.sort_values(["benchmark_name", "n", "truth_label"], ascending=[True, False, True])
        first = counts.drop_duplicates("benchmark_name")
        return cls(dict(zip(first["benchmark_name"], first["truth_label"].astype(int), strict=True)))

    async def answer(self, item: AgentItem, run_index: int) -> AgentAnswer:
        if item.benchmark_name not in self.label_by_benchmark:
            raise KeyError(f"no truth labels for benchmark {item.benchmark_name!r}")
        text = _answer_json(item, self.label_by_benchmark[item.benchmark_name])
        return AgentAnswer(text=text, steps=[Step(index=0, action="answer", text=text)])

    async def aclose(self) -> None:
        return None


ANSWER_COLUMNS = ("answer_text", "prediction", "answer")


def _as_text(value: object) -> str:
    """A recorded cell as text: missing -> "", integral floats (a label column with gaps) -> "2"."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return ""
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return str(int(value))
    return str(value)


def read_recorded(path: str | Path) -> pd.DataFrame:
    """A recorded predictions file (.csv, .jsonl, .parquet) with benchmark_id and an answer column."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"replay file {path} does not exist")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        # Answers as written: a column of only numeric-looking answers must not become floats ("2.0" -> "2").
        text_columns = {c: str for c in ("benchmark_id", "benchmark_name", *ANSWER_COLUMNS)}
        frame = pd.read_csv(path, dtype=text_columns, keep_default_na=False)
    elif suffix in (".jsonl", ".json"):
        # No dtype inference: the string "2" must stay "2", not become the float 2.0.
        frame = pd.read_json(path, lines=suffix == ".jsonl", dtype=False, convert_dates=False)
    elif suffix == ".parquet":
        frame = pd.read_parquet(path)
    else:
        got = suffix or "no suffix"
        raise ValueError(f"replay file {path}: expected .csv, .jsonl or .parquet, got {got!r}")
    answer_col = next((c for c in ANSWER_COLUMNS if c in frame.columns), None)
    if "benchmark_id" not in frame.columns or answer_col is None:
        raise ValueError(
            f"replay file {path}: needs columns benchmark_id and one of {list(ANSWER_COLUMNS)}; "
            f"found {list(frame.columns)}"
        )
    frame = frame.rename(columns={answer_col: "answer_text"})
    frame["benchmark_id"] = frame["benchmark_id"].map(_as_text).astype(object)
    frame["answer_text"] = frame["answer_text"].map(_as_text).astype(object)
    if "run_index" not in frame.columns:
        frame["run_index"] = 0
    if "benchmark_name" not in frame.columns:
        frame["benchmark_name"] = None
    frame["benchmark_name"] = frame["benchmark_name"].map(lambda v: _as_text(v) or None).astype(object)
    return frame


class ReplayAgent:
    """Answers from a recorded predictions file, keyed by (benchmark_name, benchmark_id, run_index).

    A file without run_index answers every run with its single answer (a run missing from a file
    with run_index is answered by its run 0); without benchmark_name, ids are matched across
    benchmarks. Missing answers replay as "" and integral numbers as integers ("2", not "2.0").
    A recorded ``trajectory_json`` (as in the predictions table) is replayed too, so its viewed
    regions can be evaluated again. A recorded ``item_fingerprint`` must be the item's: an answer
    recorded for another question or slide under the same id is refused, never replayed.
    """

    name = "replay"

    def __init__(self, path: str | Path) -> None:
        frame = read_recorded(path)
        self.model = Path(path).name
        self._rows: dict[tuple, dict] = {}
        for row in frame.to_dict("records"):
            key = (row["benchmark_name"], row["benchmark_id"], int(row["run_index"]))
            self._rows[key] = row

    def _lookup(self, item: AgentItem, run_index: int) -> dict:
        for name in (item.benchmark_name, None):
            for run in (run_index, 0):
                row = self._rows.get((name, item.benchmark_id, run))
                if row is not None:
                    return row
        raise KeyError(f"no recorded answer for {item.benchmark_name}/{item.benchmark_id} in {self.model}")

    async def answer(self, item: AgentItem, run_index: int) -> AgentAnswer:
        row = self._lookup(item, run_index)
        recorded_fp = row.get("item_fingerprint")  # "" or NaN: recorded before fingerprints
        if isinstance(recorded_fp, str) and recorded_fp and item.item_fingerprint not in (None, recorded_fp):
            raise ValueError(
                f"{self.model}: the answer recorded for {item.benchmark_name}/{item.benchmark_id} was for "
                "another question or slide (item_fingerprint differs); record it again for these items"
            )
        text = row["answer_text"]
        recorded = row.get("trajectory_json")
        if isinstance(recorded, str):
            recorded = parse_trajectory(recorded)
        if isinstance(recorded, list) and recorded:
            # the recorded boxes and texts come back; the spend does not: a replay costs nothing
            steps = [
                Step(**step | {"cost_usd": 0.0, "input_tokens": 0, "output_tokens": 0}) for step in recorded
            ]
        else:
            steps = [Step(index=0, action="answer", text=text)]
        return AgentAnswer(text=text, steps=steps)

    async def aclose(self) -> None:
        return None
