"""The batch runner: bounded concurrency, per-item failures as rows, budget stop, retries, resume."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from giant_assets.runs.agent_api import AgentAnswer, AgentItem, Step
from giant_assets.runs.journal import Journal
from giant_assets.runs.runner import BatchSettings, run_batch


class ScriptAgent:
    """A test agent: answers by item id from a table; records calls and peak concurrency."""

    name = "script"
    model = "m"

    def __init__(self, answers: dict[str, object], delay: float = 0.0, cost: float = 0.0) -> None:
        self.answers, self.delay, self.cost = answers, delay, cost
        self.calls: list[tuple[str, int]] = []
        self.in_flight = self.peak = 0

    async def answer(self, item: AgentItem, run_index: int) -> AgentAnswer:
        self.calls.append((item.benchmark_id, run_index))
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
            what = self.answers[item.benchmark_id]
            if isinstance(what, Exception):
                raise what
            if what == "hang":
                await asyncio.sleep(60)
            if what == "error":
                return AgentAnswer(
                    text="", steps=[Step(0, "error", error="model said no")], error="model said no"
                )
            return AgentAnswer(text=str(what), steps=[Step(0, "answer", text=str(what), cost_usd=self.cost)])
        finally:
            self.in_flight -= 1

    async def aclose(self) -> None:
        return None


def items(n: int, *, missing: tuple[int, ...] = ()) -> list[dict]:
    return [
        {
            "benchmark_name": "tcga",
            "benchmark_id": str(i),
            "prompt": "q",
            "options": ["a", "b", "c"],
            "truth_label": 1 + i % 3,
            "wsi_path": None if i in missing else f"/slides/{i}.svs",
            "wsi_status": "missing" if i in missing else "ok",
            "wsi_error": "not found under the WSI root" if i in missing else None,
        }
        for i in range(n)
    ]


def run(agent, its, journal: Journal, **settings):
    return asyncio.run(
        run_batch(agent, its, config_hash="h", journal=journal, settings=BatchSettings(**settings))
    )


def test_concurrency_is_bounded_and_every_run_is_a_row(tmp_path: Path) -> None:
    agent = ScriptAgent({str(i): '{"answer": 2}' for i in range(12)}, delay=0.02)
    out = run(agent, items(12, missing=(3,)), Journal(tmp_path / "j.jsonl"), runs_per_item=2, concurrency=3)
    assert agent.peak == 3
    assert len(agent.calls) == 22  # the missing slide's item is never given to the agent
    assert len(out.rows) == 24 and out.executed == 22 and out.reused == 0
    unavailable = [r for r in out.rows if r["error_kind"] == "slide_unavailable"]
    assert len(unavailable) == 2 and "not found" in unavailable[0]["error"]
    assert all(r["predicted_label"] == 2 for r in out.rows if r["error_kind"] is None)


def test_failures_are_rows_not_exceptions(tmp_path: Path) -> None:
    agent = ScriptAgent({"0": RuntimeError("boom"), "1": "hang", "2": "error", "3": "no idea", "4": "3"})
    out = run(agent, items(5), Journal(tmp_path / "j.jsonl"), item_timeout_s=0.3, concurrency=5)
    by_id = {r["benchmark_id"]: r for r in out.rows}
    assert by_id["0"]["error_kind"] == "agent_error" and "RuntimeError: boom" in by_id["0"]["error"]
    assert by_id["1"]["error_kind"] == "timeout"
    assert by_id["2"]["error_kind"] == "agent_error" and by_id["2"]["error"] == "model said no"
    assert by_id["3"]["error_kind"] == "no_answer" and by_id["3"]["predicted_label"] is None
    assert by_id["4"]["error_kind"] is None and by_id["4"]["correct"] is False  # truth of item 4 is 2
    assert out.failed == 3


def test_resume_reuses_finished_runs_and_retries_failed_ones(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "j.jsonl")
    first = ScriptAgent({"0": "1", "1": RuntimeError("flaky"), "2": "2"})
    run(first, items(3), journal, runs_per_item=2)
    with open(journal.path, "a") as fh:
        fh.write('{"config_hash": "h", "benchmark_na')  # a torn line from a killed writer
    second = ScriptAgent({"0": "1", "1": "1", "2": "2"})
    out = run(second, items(3), journal, runs_per_item=2)
    assert sorted(second.calls) == [("1", 0), ("1", 1)]  # only the failed runs are asked again
    assert out.reused == 4 and len(out.rows) == 6
    assert all(r["error_kind"] is None for r in out.rows)
    lines = [json.loads(line) for line in journal.path.read_text().splitlines()[-2:]]
    assert {line["benchmark_id"] for line in lines} == {"1"}  # torn line sealed, appends stay parseable
    third = ScriptAgent({})
    assert run(third, items(3), journal, runs_per_item=2, retry_failed=False).reused == 6 and not third.calls


def test_budget_stops_launching_new_runs_and_is_a_ledger_across_batches(tmp_path: Path) -> None:
    agent = ScriptAgent({str(i): "1" for i in range(10)}, cost=0.4)
    journal = Journal(tmp_path / "j.jsonl")
    lines: list[str] = []
    out = asyncio.run(
        run_batch(agent, items(10), config_hash="h", journal=journal,
                  settings=BatchSettings(concurrency=1, budget_usd=1.0), log=lines.append)
    )  # fmt: skip
    # the second run starts at $0.40 paid + $0.40 held for it; a third would pass the budget
    assert out.budget_stopped and len(agent.calls) == 2 and out.not_started == 8
    assert out.cost_usd_new == pytest.approx(0.8) and out.billed_usd == pytest.approx(0.8)
    assert any(
        "budget $1 reached (paid $0.8000 so far" in line and "8 runs not started" in line for line in lines
    )
    assert lines[-1].startswith("finished: 2/10 runs done")
    # the same budget again: what earlier batches paid counts, nothing more is spent
    again = ScriptAgent({str(i): "1" for i in range(10)}, cost=0.4)
    out = run(again, items(10), journal, concurrency=1, budget_usd=1.0)
    assert not again.calls and out.budget_stopped and out.not_started == 8
    # the budget as the user set it: $0.015, not $0.01
    tiny = ScriptAgent({str(i): "1" for i in range(10)}, cost=0.01)
    lines.clear()
    asyncio.run(
        run_batch(tiny, items(10), config_hash="h2", journal=Journal(tmp_path / "k.jsonl"),
                  settings=BatchSettings(concurrency=1, budget_usd=0.015), log=lines.append)
    )  # fmt: skip
    assert len(tiny.calls) == 1 and any("budget $0.015 reached" in line for line in lines)


def test_progress_lines_show_done_total_failures_cost_and_eta(tmp_path: Path) -> None:
    agent = ScriptAgent({"0": "1", "1": "error", "2": "1", "3": "1"}, delay=0.15, cost=0.25)
    lines: list[str] = []
    settings = BatchSettings(concurrency=1, progress_every_s=0.2)
    asyncio.run(
        run_batch(agent, items(5, missing=(4,)), config_hash="h", journal=Journal(tmp_path / "j.jsonl"),
                  settings=settings, log=lines.append)
    )  # fmt: skip
    beats = [line for line in lines if line.startswith("progress: ")]
    assert beats, lines
    later = [line for line in beats if not line.startswith("progress: 0/")]
    assert later and all(re.search(r"ETA \d+s$", line) for line in later), beats
    assert re.match(r"progress: [0-4]/4 runs done, [01] failed, [01] in flight .*1 without a slide", beats[0])
    assert lines[-1].startswith("finished: 4/4 runs done, 1 failed, 0 in flight")
    assert "cost so far $0.7500" in lines[-1] and lines[-1].endswith("none left")


def test_an_adopted_legacy_run_is_paid_once_and_the_budget_decides_on_that(tmp_path: Path) -> None:
    """A run journalled before item fingerprints (its row has no fingerprint fields) that matches its
    item is adopted: its row is appended again with the fingerprint. It cost $0.40 once: the partition
    has paid $0.40, not $0.80, and a $0.85 budget still has room for one more $0.40 run."""
    journal = Journal(tmp_path / "j.jsonl")
    run(ScriptAgent({"0": "1"}, cost=0.4), items(1), journal)  # items without fingerprints
    legacy = [json.loads(line) for line in journal.path.read_text().splitlines()]
    for row in legacy:  # the layout written before fingerprints: no fingerprint fields at all
        del row["item_fingerprint"], row["question_fingerprint"]
    journal.path.write_text("".join(json.dumps(row) + "\n" for row in legacy))
    fingerprinted = [it | {"item_fingerprint": f"fp{it['benchmark_id']}"} for it in items(2)]
    agent = ScriptAgent({"0": "1", "1": "2"}, cost=0.4)
    lines: list[str] = []
    out = asyncio.run(
        run_batch(agent, fingerprinted, config_hash="h", journal=journal,
                  settings=BatchSettings(concurrency=1, budget_usd=0.85), log=lines.append)
    )  # fmt: skip
    assert out.adopted == 1 and out.reused == 1
    # paid $0.40 (the legacy run, once) + $0.40 held for item 1 = $0.80 <= $0.85: it runs
    assert agent.calls == [("1", 0)] and not out.budget_stopped
    assert out.billed_usd == pytest.approx(0.8) and out.cost_usd_new == pytest.approx(0.4)
    rows = [json.loads(line) for line in journal.path.read_text().splitlines()]
    assert [(r["benchmark_id"], r.get("item_fingerprint")) for r in rows] == [
        ("0", None),
        ("0", "fp0"),
        ("1", "fp1"),
    ]
    # the next batch finds everything paid: $0.80, and a $0.85 budget has no room for more
    again = ScriptAgent({"0": "1", "1": "2", "2": "3"}, cost=0.4)
    more = fingerprinted + [items(3)[2] | {"item_fingerprint": "fp2"}]
    out = run(again, more, journal, concurrency=1, budget_usd=0.85)
    assert not again.calls and out.budget_stopped and out.billed_usd == pytest.approx(0.8)


def test_every_known_secret_in_a_run_text_is_stored_redacted(tmp_path: Path, monkeypatch) -> None:
    """The runner scrubs what a model or server wrote before it is journalled: an API key read from the
    environment, an AWS session token from the boto3 chain, a Bedrock bearer token, in an exception's
    text and in an answer. Mutation: ``result_row`` returns the row unscrubbed."""
    from giant_assets.agents.providers.anthropic_clouds import _remember_aws_credentials
    from giant_assets.agents.providers.keys import api_key_from_env

    key, session, bearer = "sk-test-" + "k" * 30, "FwoGZXIvYXdzE" + "s" * 40, "bedrock-api-key-" + "b" * 30
    for name, value in {"GIANT_REDACT_KEY": key, "AWS_BEARER_TOKEN_BEDROCK": bearer,
                        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLEREDACT", "AWS_SECRET_ACCESS_KEY": "w" * 40,
                        "AWS_SESSION_TOKEN": session, "AWS_CONFIG_FILE": str(tmp_path / "none"),
                        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    api_key_from_env("GIANT_REDACT_KEY", True)
    api_key_from_env("AWS_BEARER_TOKEN_BEDROCK", True)
    _remember_aws_credentials("us-east-1")
    said = f"401 key={key} token={session} 'Authorization: Bearer {bearer}'"
    agent = ScriptAgent({"0": RuntimeError(said), "1": f'{{"answer": 2}} sent with {key}'})
    out = run(agent, items(2), Journal(tmp_path / "j.jsonl"))
    stored = (tmp_path / "j.jsonl").read_text()
    for secret in (key, session, bearer, key[:12], session[:12], bearer[:12], "w" * 12):
        assert secret not in stored
    by_id = {r["benchmark_id"]: r for r in out.rows}
    R = "[REDACTED]"
    assert by_id["0"]["error"] == f"RuntimeError: 401 key={R} token={R} 'Authorization: Bearer {R}'"
    assert (
        by_id["1"]["answer_text"] == f'{{"answer": 2}} sent with {R}' and by_id["1"]["predicted_label"] == 2
    )
