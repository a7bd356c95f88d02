"""Hand arithmetic on the files that account for money: the reply store, the partition and experiment
ledgers, the hold files. Each test kills a mutation of the code it guards that the behavioural tests
(``test_replies.py``, ``test_holds.py``) let through; the mutation is named in its docstring."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from giant_assets.runs.ledger import ExperimentLedger, PartitionLedger
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


def test_the_ledger_waits_for_a_torn_tail_and_reads_it_once_complete(tmp_path: Path) -> None:
    """Mutation: ``_Tail.new`` reads up to the end of the file (a line still being written is consumed
    as garbage, and its completed rest never parses)."""
    path = tmp_path / "tcga.replies.jsonl"
    torn = json.dumps(reply(RUN0, 1, 0.5)) + "\n"
    write_lines(path, [reply(RUN0, 0, 0.25)], tail=torn[:20])
    ledger = PartitionLedger(tmp_path / "tcga.jsonl")
    assert ledger.spent() == pytest.approx(0.25)
    write_lines(path, [], tail=torn[20:])  # the writer finishes its line
    assert ledger.spent() == pytest.approx(0.75)
    write_lines(path, [reply(RUN1, 0, 1.0)])
    assert ledger.spent() == pytest.approx(1.75) and ledger.billed() == pytest.approx(1.75)


def test_a_journal_row_is_covered_by_the_store_from_its_runs_first_reply_on(tmp_path: Path) -> None:
    """A run's row written before its first stored reply (an execution from before the store) is paid
    from the journal; one written at or after it is in the store. Mutations: every row of a run with
    replies counted as covered; ``>=`` as ``>``; a rewritten row (same run, start and end) paid twice."""
    journal = tmp_path / "tcga.jsonl"
    write_lines(tmp_path / "tcga.replies.jsonl", [reply(RUN0, 0, 0.25, at="2026-01-01T00:05")])
    old = journal_row(RUN0, 0.5, finished_at="2026-01-01T00:04")
    write_lines(journal, [old, old, journal_row(RUN0, 0.25, finished_at="2026-01-01T00:05"),
                          journal_row(RUN1, 0.125, finished_at="2026-01-01T00:09")])  # fmt: skip
    ledger = PartitionLedger(journal)
    assert ledger.spent() == pytest.approx(0.25 + 0.5 + 0.125)
    assert (ledger.replies_usd, ledger.journal_only_usd) == (pytest.approx(0.25), pytest.approx(0.625))
    rerun = journal_row(RUN1, 0.0625, finished_at="2026-01-01T00:12", started_at="2026-01-01T00:10")
    write_lines(journal, [rerun])  # RUN1 again (no store): a second execution, paid again
    assert ledger.spent() == pytest.approx(0.25 + 0.5 + 0.125 + 0.0625)


def test_a_cost_of_no_price_is_unknown_never_zero(tmp_path: Path) -> None:
    """Mutations: a NaN reply or journal-only row not counted in ``unpriced``; ``billed()`` returning
    the partial sum; a negative cost subtracted."""
    folder = tmp_path / "h"
    folder.mkdir()
    write_lines(folder / "tcga.replies.jsonl", [reply(RUN0, 0, 0.25), reply(RUN0, 1, -1.0, digest="e")])
    ledger = PartitionLedger(folder / "tcga.jsonl")
    assert ledger.billed() == pytest.approx(0.25) and ledger.unpriced == 0
    write_lines(folder / "tcga.replies.jsonl", [reply(RUN0, 2, math.nan)])
    assert ledger.spent() == pytest.approx(0.25) and ledger.unpriced == 1 and math.isnan(ledger.billed())
    only = PartitionLedger(folder / "panda.jsonl")  # a journal-only run of unknown cost
    write_lines(folder / "panda.jsonl", [journal_row(RUN1, math.nan, finished_at="2026-01-01T00:09")])
    assert only.spent() == 0.0 and only.unpriced == 1 and math.isnan(only.billed())


def test_the_experiment_ledger_counts_a_partition_with_replies_and_no_journal_yet(tmp_path: Path) -> None:
    """Mutation: ``ExperimentLedger.spent`` reads only partitions that have a journal (a cell killed
    before its first run ended has paid replies and no journal)."""
    folder = tmp_path / "h"
    folder.mkdir()
    write_lines(folder / "tcga.jsonl", [journal_row(RUN0, 0.5, finished_at="2026-01-01T00:04")])
    write_lines(folder / "panda.replies.jsonl", [reply(RUN1, 0, 0.25), reply(RUN1, 1, math.nan)])
    whole = ExperimentLedger(folder)
    assert whole.spent() == pytest.approx(0.75) and whole.unpriced == 1
    write_lines(folder / "gtex.replies.jsonl", [reply(RUN1, 0, 2.0)])  # a cell that started since
    assert whole.spent() == pytest.approx(2.75)


def test_an_adopted_legacy_row_is_the_same_payment(tmp_path: Path) -> None:
    """plan.py rewrites a legacy row (no fingerprint fields) with its item's fingerprint. Mutations: the
    ledger's once-per-execution stamp keyed by the fingerprinted run (a $0.40 run billed $0.80); the
    stamp recorded only for rows it pays (a legacy row covered by the store, adopted, paid again)."""
    journal = tmp_path / "tcga.jsonl"
    legacy = {k: v for k, v in journal_row(RUN0, 0.4, finished_at="2026-01-01T00:04").items()
              if k != "item_fingerprint"}  # fmt: skip
    write_lines(journal, [legacy])
    ledger = PartitionLedger(journal)
    assert ledger.spent() == pytest.approx(0.4)
    write_lines(journal, [legacy | {"item_fingerprint": "fp", "question_fingerprint": "q"}])
    assert ledger.spent() == pytest.approx(0.4) and PartitionLedger(journal).spent() == pytest.approx(0.4)
    # a legacy run whose replies are in the store (keyed without a fingerprint): $0.25 there, once
    old_run = RunIdentity("h", "tcga", "i1", 1)
    write_lines(tmp_path / "tcga.replies.jsonl", [reply(old_run, 0, 0.25, at="2026-01-01T00:06")])
    covered = journal_row(old_run, 0.25, finished_at="2026-01-01T00:07") | {"item_fingerprint": None}
    write_lines(journal, [covered, covered | {"item_fingerprint": "fp"}])
    assert ledger.spent() == pytest.approx(0.65) and PartitionLedger(journal).spent() == pytest.approx(0.65)
