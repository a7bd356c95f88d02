"""``giant-experiments batches`` over a store it cannot fully act on: each batch's line says why, the
others are still listed, the exit code is 1, and nothing ends in a traceback."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from giant_assets.platform import experiments_cli
from tests.support.dagster_env import write_experiments


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def store(data: Path, folder: str, rows: list[dict]) -> None:
    path = data / "journals" / folder / "tcga.batches" / "batches.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def batch(experiment: str, batch_id: str) -> dict:
    where = {"experiment": experiment, "benchmark": "tcga", "partition": f"{experiment}|tcga"}
    return where | {"batch_id": batch_id, "status": "submitted", "submitted_at": 1_700_000_000, "requests": 3}


def test_batches_when_the_provider_is_down_the_experiment_removed_and_a_row_lacks_its_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data, declared = tmp_path / "data", tmp_path / "experiments.yaml"
    monkeypatch.setenv("GIANT_DATA_DIR", str(data))
    monkeypatch.setenv("GIANT_EXPERIMENTS", str(declared))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET-key-never-printed")
    down = f"http://127.0.0.1:{closed_port()}/v1"
    settings = {"agent": "giant", "model": "gpt-5", "base_url": down, "batch": True}
    write_experiments(declared, {"down": settings})
    store(data, "aaa", [batch("down", "batch_down"), {"experiment": "down", "status": "submitted"}])
    store(data, "bbb", [batch("gone", "batch_gone")])

    assert experiments_cli.main(["batches"]) == 1
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert "Traceback" not in out.err and "SECRET" not in out.out + out.err
    down_line = next(line for line in lines if line.startswith("down|tcga\tbatch_down\t3 requests"))
    assert "status unknown: the provider could not be asked: " in down_line
    assert "failed after 2 attempts" in down_line and "connection failed" in down_line
    gone_line = next(line for line in lines if line.startswith("gone|tcga\tbatch_gone\t"))
    assert "status unknown: " in gone_line and "experiment 'gone' is not declared (removed?)" in gone_line
    assert "2 batch(es) open; 2 could not be checked (see above)" in lines
    assert len(lines) == 3  # the row without a batch_id names no batch: skipped, not a KeyError

    assert experiments_cli.main(["batches", "down", "--cancel"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "0 batch(es) cancelled for down; 1 could not be cancelled (see above)"
