"""Hand arithmetic on the files that account for money: the reply store, the partition and experiment
ledgers, the hold files. Each test kills a mutation of the code it guards that the behavioural tests
(``test_replies.py``, ``test_holds.py``) let through; the mutation is named in its docstring."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from giant_assets.runs.ledger import PartitionLedger
from giant_assets.runs.replies import ReplyStore, request_digest
from giant_assets.runs.run_identity import RunIdentity

RUN0 = RunIdentity("h", "tcga", "i1", 0, "fp")
RUN1 = RunIdentity("h", "tcga", "i1", 1, "fp")


def reply(run: RunIdentity, n: int, usd: float, digest: str = "d", at: str = "2026-01-01T00:00:01") -> dict:
    return {"run": run.key, "digest": digest, "n": n, "cost_usd": usd, "at": at, "response": {"n": n}}


def write_lines(path: Path, rows: list[dict], tail: str = "") -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
        fh.write(tail)


def journal_row(run: RunIdentity, usd: float, finished_at: str, started_at: str = "2026-01-01T00:00") -> dict:
    return {"config_hash": run.config_hash, "benchmark_name": run.benchmark_name,
            "benchmark_id": run.benchmark_id, "run_index": run.run_index, "item_fingerprint": "fp",
            "cost_usd": usd, "started_at": started_at, "finished_at": finished_at}  # fmt: skip


def test_a_duplicated_store_line_is_paid_once(tmp_path: Path) -> None:
    """Mutations: ``ReplyStore._index`` and ``PartitionLedger.spent`` without their seen-key check."""
    path = tmp_path / "tcga.replies.jsonl"
    write_lines(path, [reply(RUN0, 0, 0.25), reply(RUN0, 0, 0.25), reply(RUN0, 1, 0.5)])
    store = ReplyStore(path)
    assert store.total_usd == pytest.approx(0.75)
    assert PartitionLedger(tmp_path / "tcga.jsonl").spent() == pytest.approx(0.75)


def test_the_request_digest_is_of_canonical_json() -> None:
    """Mutation: ``request_digest`` without ``sort_keys`` (one body, two key orders, two digests)."""
    assert request_digest({"model": "m", "input": [1, 2]}) == request_digest({"input": [1, 2], "model": "m"})
    assert request_digest({"input": [1, 2]}) != request_digest({"input": [2, 1]})
