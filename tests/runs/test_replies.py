"""The reply store: a killed GIANT batch (a real subprocess against the loopback scripted model) re-pays
only the request in flight at the kill; runs of one item stay independent samples; a broken store or
journal stops new runs at once; the budget is a ledger over every process's spend."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from giant_assets.agents.giant import GiantAgent
from giant_assets.agents.pricing import load_price_table
from giant_assets.agents.providers import AnthropicChatModel, RetryPolicy
from giant_assets.demo.scripted import Reply, ScriptedModelServer, answer_reply, crop_reply
from giant_assets.runs.journal import Journal
from giant_assets.runs.ledger import ExperimentLedger, PartitionLedger
from giant_assets.runs.replies import ReplyStore, StoreWriteFailed, replies_path
from giant_assets.runs.runner import BatchSettings, run_batch, usd_as_set
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.support.slides import write_pyramidal_slide

REPO = Path(__file__).resolve().parents[2]
MODEL = "scripted-ledger"
CALLS_PER_RUN = 4  # three crops, then the answer
OPTIONS = ["Lung", "Liver", "Skin"]
PROMPT = 'Which organ?\n1. Lung\n2. Liver\n3. Skin\nAnswer as JSON {"answer": N}.'


@pytest.fixture(scope="module")
def slide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(tmp_path_factory.mktemp("replies") / "s.tiff", ONE_LESION_DESIGN, levels=4)


@pytest.fixture
def priced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Prices for the scripted model (GIANT_PRICES) and a key; the env a child process needs."""
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({MODEL: {"input_per_mtok": 2.0, "output_per_mtok": 8.0}}))
    monkeypatch.setenv("GIANT_PRICES", str(prices))
    monkeypatch.setenv("GIANT_TEST_KEY", "sk-test-ledger")
    return {"GIANT_PRICES": str(prices), "GIANT_TEST_KEY": "sk-test-ledger"}


def items(slide: Path, n: int) -> list[dict]:
    return [
        {"benchmark_name": "tcga", "benchmark_id": f"i{i}", "prompt": PROMPT, "options": OPTIONS,
         "truth_label": 1 + i % 3, "wsi_path": str(slide), "item_fingerprint": f"fp{i}"}
        for i in range(n)
    ]  # fmt: skip


def rule(block_at: int | None = None, gate: threading.Event | None = None, on=None):
    """Three crops then an answer per conversation; request number ``block_at`` waits on ``gate``, or
    calls ``on()`` before it is answered."""
    count = [0]
    lock = threading.Lock()

    def reply(request) -> Reply:
        with lock:
            count[0] += 1
            n = count[0]
        if n == block_at and gate is not None:
            gate.wait(30)
        if n == block_at and on is not None:
            on()
        if request.assistant_turns < CALLS_PER_RUN - 1:
            return crop_reply(100 * request.assistant_turns, 200, 800, 600)
        return answer_reply("2")

    return reply


def disk_full(path: Path):
    """Replace ``path`` by a symlink to /dev/full (every write to it then fails with ENOSPC)."""

    def swap() -> None:
        link = path.with_name(path.name + ".full")
        link.symlink_to("/dev/full")
        os.replace(link, path)

    return swap


def agent(server: ScriptedModelServer) -> GiantAgent:
    model = AnthropicChatModel(
        MODEL,
        base_url=server.base_url,
        api_key_env="GIANT_TEST_KEY",
        retry=RetryPolicy(max_attempts=1),
    )
    return GiantAgent(model, prices=load_price_table(os.environ["GIANT_PRICES"]), image_size=500, max_steps=6)


def run(server: ScriptedModelServer, its: list[dict], journal: Journal, **settings):
    a = agent(server)

    async def go():
        try:
            return await run_batch(
                a, its, config_hash="h", journal=journal, settings=BatchSettings(**settings)
            )
        finally:
            await a.aclose()

    return asyncio.run(go())


def answers(journal: Journal) -> dict[tuple, tuple]:
    return {
        (k[2], k[3]): (r["answer_text"], r["predicted_label"], r["n_steps"])
        for k, r in journal.read().items()
    }


def test_a_killed_batch_re_pays_only_the_request_in_flight(
    tmp_path: Path, slide: Path, priced: dict[str, str]
) -> None:
    its = items(slide, 3)
    runs = len(its) * 2
    needed = runs * CALLS_PER_RUN
    # the uninterrupted reference: each run of an item sends its own requests (no collapse into one sample)
    with ScriptedModelServer(rule=rule()) as ref_server:
        reference = Journal(tmp_path / "ref" / "tcga.jsonl")
        out = run(ref_server, its, reference, runs_per_item=2, concurrency=1)
        assert len(ref_server.requests) == needed and out.executed == runs and out.replayed_calls == 0
    store = ReplyStore(replies_path(reference.path))
    assert len(store._entries) == needed  # every reply kept, each run's under its own key
    assert store.total_usd == pytest.approx(out.cost_usd_new) and store.total_usd > 0

    gate = threading.Event()
    block_at = 2 * CALLS_PER_RUN + 2  # the third run's second request: two runs done, one reply of it kept
    journal = Journal(tmp_path / "j" / "tcga.jsonl")
    spec = tmp_path / "spec.json"
    with ScriptedModelServer(rule=rule(block_at, gate)) as server:
        spec.write_text(json.dumps({
            "model": MODEL, "base_url": server.base_url, "items": its, "journal": str(journal.path),
            "settings": {"runs_per_item": 2, "concurrency": 1},
        }))  # fmt: skip
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIANT_")} | priced
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.support.giant_batch_child", str(spec)], cwd=REPO, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while len(server.requests) < block_at and child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            assert len(server.requests) == block_at, (
                child.stderr.read().decode()[-3000:] if child.poll() else ""
            )
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(10)
            gate.set()
        at_kill = len(server.requests)
        in_flight = at_kill - len(ReplyStore(replies_path(journal.path))._entries)
        assert in_flight == 1 and len(journal.read()) == 2
        out = run(server, its, journal, runs_per_item=2, concurrency=1)
        total = len(server.requests)
    assert total == needed + in_flight  # today's code: needed + the 2 answered requests of the killed run
    assert out.replayed_calls == 1 and out.executed == runs - 2
    assert answers(journal) == answers(reference)
    replayed = [s for r in journal.read().values() for s in json.loads(r["trajectory_json"])
                if any("replayed" in n for n in s.get("provider_notes") or [])]  # fmt: skip
    assert len(replayed) == 1 and replayed[0]["http_attempts"] == 0
    # the ledger: every reply paid once, whatever process paid it
    assert PartitionLedger(journal.path).spent() == pytest.approx(
        ReplyStore(replies_path(journal.path)).total_usd
    )


def test_a_full_journal_stops_new_runs_at_once_and_keeps_what_was_paid(
    tmp_path: Path, slide: Path, priced: dict[str, str]
) -> None:
    journal = Journal(tmp_path / "j" / "tcga.jsonl")
    second_run = CALLS_PER_RUN + 1  # the disk fills as the second run starts: the first is journalled
    with ScriptedModelServer(rule=rule(second_run, on=disk_full(journal.path))) as server:
        with pytest.raises(StoreWriteFailed) as failed:
            run(server, items(slide, 5), journal, concurrency=1, budget_usd=100.0)
        assert len(server.requests) == 2 * CALLS_PER_RUN  # none started after the failed write
    message = str(failed.value)
    assert f"cannot write the journal {journal.path}" in message and "No space left" in message
    assert "3 not started" in message
    kept = ReplyStore(replies_path(journal.path))  # nothing paid was dropped: a re-run replays it
    assert len(kept._entries) == 2 * CALLS_PER_RUN and kept.total_usd > 0


def test_a_full_reply_store_stops_new_runs_and_names_the_file(
    tmp_path: Path, slide: Path, priced: dict[str, str]
) -> None:
    journal = Journal(tmp_path / "j" / "tcga.jsonl")
    store = replies_path(journal.path)
    with ScriptedModelServer(rule=rule(CALLS_PER_RUN + 1, on=disk_full(store))) as server:
        with pytest.raises(StoreWriteFailed) as failed:
            run(server, items(slide, 4), journal, concurrency=1)
        assert len(server.requests) == 2 * CALLS_PER_RUN
    assert f"cannot write the reply store {store}" in str(failed.value)
    rows = journal.read()  # the run in flight kept its paid answer: journalled
    assert len(rows) == 2 and all(r["predicted_label"] == 2 and r["cost_usd"] > 0 for r in rows.values())


def test_the_budget_is_a_ledger_over_every_process_and_holds_under_concurrency(
    tmp_path: Path, slide: Path, priced: dict[str, str]
) -> None:
    its = items(slide, 8)
    with ScriptedModelServer(rule=rule()) as server:
        probe = Journal(tmp_path / "probe" / "tcga.jsonl")
        one = run(server, its[:1], probe).cost_usd_new  # what one run costs here
        assert one > 0
        server.requests.clear()
        budget = 3.5 * one
        journal = Journal(tmp_path / "j" / "tcga.jsonl")
        lines: list[str] = []
        out = asyncio.run(_run_logged(server, its, journal, lines, concurrency=8, budget_usd=budget,
                                      reserve_usd=one))  # fmt: skip
        # reservations: 3 runs start (3.5 x one holds 3 reservations), the 4th waits, then never starts
        assert len(server.requests) == 3 * CALLS_PER_RUN and out.not_started == 5 and out.budget_stopped
        first_paid = PartitionLedger(journal.path).spent()
        assert first_paid == pytest.approx(3 * one) and first_paid <= budget
        assert any(f"budget {usd_as_set(budget)} reached (paid ${first_paid:.4f}" in line for line in lines)
        # a re-materialization with the same budget pays nothing more
        again = run(server, its, journal, concurrency=8, budget_usd=budget)
        assert len(server.requests) == 3 * CALLS_PER_RUN and again.not_started == 5
        # without a reservation (no estimate), 8 at once: the overshoot is at most the runs in flight
        wide = Journal(tmp_path / "wide" / "tcga.jsonl")
        server.requests.clear()
        run(server, its, wide, concurrency=8, budget_usd=0.5 * one)
        paid = PartitionLedger(wide.path).spent()
        assert paid <= 0.5 * one + 8 * one and len(server.requests) == 8 * CALLS_PER_RUN
        # an experiment budget counts every partition of the result set
        other = Journal(tmp_path / "j" / "other.jsonl")
        server.requests.clear()
        capped = run(server, [it | {"benchmark_name": "other"} for it in its], other, concurrency=1,
                     experiment_budget_usd=4.5 * one)  # fmt: skip
    assert len(server.requests) == CALLS_PER_RUN and capped.budget_stopped
    assert ExperimentLedger(journal.path.parent).spent() == pytest.approx(4 * one)


def test_an_experiment_budget_counts_the_reservations_of_cells_running_in_other_processes(
    tmp_path: Path, slide: Path, priced: dict[str, str]
) -> None:
    """Two cells of one result set in two processes at once, room for 3 runs under the experiment budget:
    3 runs start between them, not 3 each (each process seeing only its own reservations)."""
    with ScriptedModelServer(rule=rule()) as server:
        one = run(server, items(slide, 1), Journal(tmp_path / "probe" / "tcga.jsonl")).cost_usd_new
    gate = threading.Event()

    def held_reply(request) -> Reply:
        gate.wait(30)
        return rule()(request)

    folder = tmp_path / "j"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIANT_")} | priced
    settings = {"concurrency": 4, "experiment_budget_usd": 3.5 * one, "reserve_usd": one}
    children = []
    with ScriptedModelServer(rule=held_reply) as server:
        try:
            for bench in ("tcga", "gtex"):
                spec = tmp_path / f"{bench}.json"
                spec.write_text(json.dumps({
                    "model": MODEL, "base_url": server.base_url, "journal": str(folder / f"{bench}.jsonl"),
                    "items": [it | {"benchmark_name": bench} for it in items(slide, 4)], "settings": settings,
                }))  # fmt: skip
                children.append(subprocess.Popen(
                    [sys.executable, "-m", "tests.support.giant_batch_child", str(spec)], cwd=REPO, env=env,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                ))  # fmt: skip
            # both cells are deciding (each has its hold file) and no new run has started for a second
            deadline, seen, still_since = time.monotonic() + 60, -1, time.monotonic()
            while time.monotonic() < deadline:
                holders = len(list((folder / "holds").glob("*.hold"))) if (folder / "holds").is_dir() else 0
                if len(server.requests) != seen:
                    seen, still_since = len(server.requests), time.monotonic()
                elif holders == 2 and seen and time.monotonic() - still_since > 1.0:
                    break
                assert all(c.poll() is None for c in children), children[0].stderr.read().decode()[-2000:]
                time.sleep(0.05)
            started = len(server.requests)  # each run's first request, held at the gate
        finally:
            gate.set()
            outs = [c.communicate(timeout=60) for c in children]
        total = len(server.requests)
    assert [c.returncode for c in children] == [0, 0], [e.decode()[-2000:] for _, e in outs]
    assert started == 3 and total == 3 * CALLS_PER_RUN
    executed = sum(json.loads(o.decode().strip().splitlines()[-1])["executed"] for o, _ in outs)
    assert executed == 3
    assert ExperimentLedger(folder).spent() == pytest.approx(3 * one) and 3 * one <= 3.5 * one
    assert not list((folder / "holds").glob("*.hold"))  # each process removed its hold file


async def _run_logged(server, its, journal, lines, **settings):
    a = agent(server)
    try:
        return await run_batch(
            a, its, config_hash="h", journal=journal, settings=BatchSettings(**settings), log=lines.append
        )
    finally:
        await a.aclose()


def test_the_store_skips_a_torn_line_seals_it_and_pays_a_reply_once(tmp_path: Path) -> None:
    from giant_assets.runs.replies import RunReplies
    from giant_assets.runs.run_identity import RunIdentity

    path = tmp_path / "tcga.replies.jsonl"
    runs = [RunReplies(ReplyStore(path), RunIdentity("h", "tcga", "1", r, "fp")) for r in (0, 1)]
    for replies in runs:  # the same request in two runs of one item: two entries, never one
        replies.record("d", replies.occurrence("d"), {"id": replies.identity.run_index}, cost_usd=0.25)
    with open(path, "a") as fh:
        fh.write('{"run": "x", "digest": "d", "n": 0, "cost_us')  # killed mid-write
    store = ReplyStore(path)
    assert store.skipped_lines == 1 and store.total_usd == pytest.approx(0.5)
    again = RunReplies(store, runs[1].identity)
    assert again.lookup("d", again.occurrence("d"))["response"] == {"id": 1}
    assert again.lookup("d", again.occurrence("d")) is None  # its second send of "d" was never answered
    again.record("d", 1, {"id": "second"}, cost_usd=0.125)
    reread = ReplyStore(path)
    assert reread.skipped_lines == 1 and reread.total_usd == pytest.approx(0.625)
    assert PartitionLedger(tmp_path / "tcga.jsonl").spent() == pytest.approx(0.625)
    # replies of runs that will not run again are read for their cost only, never replayed
    finished = ReplyStore(path, replay_runs={runs[0].identity.key})
    assert finished.total_usd == pytest.approx(0.625) and finished.get(runs[1].identity.key, "d", 0) is None
    assert finished.get(runs[0].identity.key, "d", 0)["response"] == {"id": 0}
