"""Run an agent over items ``runs_per_item`` times: bounded concurrency, budget cap, resumable.

``plan.plan_runs`` decides what to run (pure); ``execute`` runs it (async), journalling every finished
run as one ``records.RunRecord``; ``run_batch`` does both under the journal lock and orphan watchdog.

Every run executes with its reply store (``replies.py``): the model replies it is sent are kept before
it uses them, and a run that did not finish before replays them when it runs again. The budget is a
ledger (``ledger.py``): before a run starts, what the partition (and, with an experiment budget, every
partition of the result set) has paid so far in any process, plus a reservation of each run in flight
(with an experiment budget, those of every process running a partition of the result set: ``holds.py``),
plus this run's reservation, must stay within the budget. The first failed journal or reply-store write
starts no new run and fails the batch naming the file (``StoreWriteFailed``).
"""

from __future__ import annotations

import asyncio
import contextlib
import decimal
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from giant_assets.core.money import usd_text
from giant_assets.core.secrets import redact_secrets
from giant_assets.runs.agent_api import Agent, AgentAnswer, AgentItem
from giant_assets.runs.extraction import extract_label
from giant_assets.runs.guard import journal_lock, stop_when_orphaned
from giant_assets.runs.holds import HoldBoard
from giant_assets.runs.journal import Journal
from giant_assets.runs.ledger import ExperimentLedger, PartitionLedger, row_identity
from giant_assets.runs.plan import RunPlan, for_item, plan_runs
from giant_assets.runs.records import (
    AGENT_ERROR,
    NO_ANSWER,
    RETRYABLE,
    SLIDE_UNAVAILABLE,
    TIMEOUT,
    RunRecord,
    RunWaiting,
)
from giant_assets.runs.replies import ReplyStore, RunReplies, StoreWriteFailed, recording, replies_path
from giant_assets.runs.run_identity import running

_LOG = logging.getLogger(__name__)
OTHERS_POLL_S = 0.5  # how often a batch waiting on other cells' reservations looks again
_MODEL_TEXT = ("answer_text", "extraction", "error", "trajectory_json")  # what a server or model wrote


@dataclass(frozen=True)
class BatchSettings:
    runs_per_item: int = 1
    concurrency: int = 4
    budget_usd: float = 0.0  # 0 means no cap; this partition, every process's spend included
    experiment_budget_usd: float = 0.0  # 0 means no cap; every partition of the journal's result set
    reserve_usd: float = 0.0  # held per run in flight: its estimated cost (the mean paid run if higher)
    item_timeout_s: float | None = 900.0  # None: no limit (batch mode)
    retry_failed: bool = True  # re-run (item, run) pairs whose last attempt was an agent error/timeout
    progress_every_s: float = 10.0
    # called with each progress line's numbers (the Dagster layer shows them in the UI as they go)
    on_progress: Callable[[dict[str, Any]], None] | None = None
    # wraps each run (batch mode: the round counts the runs in flight); None: nothing
    run_scope: Callable[[], AbstractAsyncContextManager] | None = None


@dataclass
class BatchOutcome:
    rows: list[dict[str, Any]]
    total_runs: int = 0
    reused: int = 0
    adopted: int = 0  # journalled without a fingerprint, matched their item, rewritten with it
    set_aside: int = 0  # journalled without a fingerprint, matched no item: not reused, not deleted
    kept_unverified: int = 0  # answers kept although their slide cannot be read now
    executed: int = 0
    failed: int = 0
    not_started: int = 0
    budget_stopped: bool = False
    cost_usd_new: float = 0.0  # what the provider billed in this batch (replayed replies excluded)
    billed_usd: float = 0.0  # everything the partition has paid, every process and run, counted or not;
    # NaN when some of it has no price (unknown)
    replayed_calls: int = 0  # model replies replayed from the reply store instead of being paid again
    waiting: int = 0  # runs stopped unfinished: their model request waits in a provider batch
    log_lines: list[str] = field(default_factory=list)


def _scope(settings: BatchSettings) -> AbstractAsyncContextManager:
    return settings.run_scope() if settings.run_scope is not None else contextlib.nullcontext()


def agent_item(item: dict[str, Any]) -> AgentItem:
    """The agent's view of one row of benchmark_items."""
    options = item.get("options")
    return AgentItem(
        benchmark_name=item["benchmark_name"],
        benchmark_id=str(item["benchmark_id"]),
        prompt=item["prompt"],
        options=list(options) if options is not None else None,
        wsi_path=item.get("wsi_path"),
        width=_maybe_int(item.get("width")),
        height=_maybe_int(item.get("height")),
        item_fingerprint=item.get("item_fingerprint") or None,
        question=item["prompt_template"] if isinstance(item.get("prompt_template"), str) else None,
    )


def _maybe_int(value: Any) -> int | None:
    try:
        return None if value is None or value != value else int(value)
    except (TypeError, ValueError):
        return None


def _duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def usd_as_set(value: float) -> str:
    """A USD amount as the user wrote it: ``$0.015``, ``$50``."""
    return "$" + format(decimal.Decimal(str(value)).normalize(), "f")


def _now() -> str:
    return datetime.now(UTC).isoformat()


def result_row(
    base: dict[str, Any],
    item: dict[str, Any],
    answer: AgentAnswer | None,
    error_kind: str | None,
    error: str | None,
) -> dict[str, Any]:
    """One persisted result: the answer, its extracted label, accounting and the full trajectory.

    The one place a run's text enters storage (journal, ``predictions``, ``trajectory_steps``): every
    field a model or server wrote is scrubbed of the API keys read in this process
    (``keys.redact_secrets``).
    """
    text = answer.text if answer else ""
    label, reason = None, None
    if answer is not None and error_kind is None:
        options = item.get("options")
        extracted = extract_label(
            text,
            benchmark_name=item["benchmark_name"],
            options=list(options) if options is not None else None,
        )
        label, reason = extracted.label, extracted.reason
        if label is None:
            error_kind, error = NO_ANSWER, f"no label could be extracted: {reason}"
    steps = answer.steps_as_dicts() if answer else []
    record = RunRecord(
        **base,
        answer_text=text,
        predicted_label=label,
        extraction=reason,
        truth_label=int(item["truth_label"]),
        correct=bool(label is not None and label == int(item["truth_label"])),
        error_kind=error_kind,
        error=error,
        input_tokens=answer.input_tokens if answer else 0,
        cached_input_tokens=sum(s.get("cached_input_tokens") or 0 for s in steps),
        output_tokens=answer.output_tokens if answer else 0,
        cost_usd=answer.cost_usd if answer else 0.0,
        latency_s=float(sum(s["latency_s"] for s in steps)),
        n_steps=len(steps),
        n_attempts=answer.attempts if answer else 0,
        response_tagged=answer.response_tagged if answer else None,
        trajectory_json=json.dumps(steps, default=str),
        finished_at=_now(),
    )
    row = record.model_dump()
    return row | {k: redact_secrets(row[k]) for k in _MODEL_TEXT if row[k] is not None}


async def run_batch(
    agent: Agent,
    items: Sequence[dict[str, Any]],
    *,
    config_hash: str,
    journal: Journal,
    settings: BatchSettings,
    log: Callable[[str], None] = _LOG.info,
    warn: Callable[[str], None] | None = None,
) -> BatchOutcome:
    """Run every (item, run) not already finished in ``journal``; return all rows of this result set.

    Guarded (runs/guard.py): one writer per journal at a time, and the batch stops if orphaned.
    ``warn`` also receives this thread's warnings of the ``giant_assets`` loggers while the batch runs
    (every retried model call, with its reason), e.g. Dagster's ``context.log.warning``.
    """
    with forward_warnings(warn):
        async with journal_lock(journal.path, log=log), stop_when_orphaned(log=log):
            return await _run_batch(
                agent, items, config_hash=config_hash, journal=journal, settings=settings, log=log
            )


class _Forward(logging.Handler):
    """Passes WARNING and above of one thread (the batch's event loop) to a callable."""

    def __init__(self, warn: Callable[[str], None]) -> None:
        super().__init__(logging.WARNING)
        self.warn = warn
        self.thread = threading.get_ident()

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            try:
                self.warn(record.getMessage())
            except Exception:  # a log sink's failure must not fail a run
                self.handleError(record)


@contextlib.contextmanager
def forward_warnings(warn: Callable[[str], None] | None) -> Iterator[None]:
    """While inside, this thread's ``giant_assets`` warnings also go to ``warn`` (None: nowhere else)."""
    if warn is None:
        yield
        return
    handler = _Forward(warn)
    logger = logging.getLogger("giant_assets")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


async def _run_batch(
    agent: Agent,
    items: Sequence[dict[str, Any]],
    *,
    config_hash: str,
    journal: Journal,
    settings: BatchSettings,
    log: Callable[[str], None],
) -> BatchOutcome:
    plan = plan_runs(
        items,
        identity={"config_hash": config_hash, "agent": agent.name, "model": agent.model},
        runs_per_item=settings.runs_per_item,
        done=journal.read(),
        retry_failed=settings.retry_failed,
        unavailable_row=lambda base, item, reason: result_row(base, item, None, SLIDE_UNAVAILABLE, reason),
    )
    if plan.adopted:
        journal.append(plan.adopted)
        log(
            f"{len(plan.adopted)} run(s) journalled before item fingerprints match their item "
            "(truth label, slide size): reused and rewritten with the fingerprint"
        )
    if plan.set_aside:
        log(
            f"{plan.set_aside} run(s) journalled before item fingerprints do not match the current items: "
            f"set aside (not reused, left in {journal.path})"
        )
    if plan.kept_unverified:
        log(
            f"{plan.kept_unverified} run(s) of slides that cannot be read now keep their journalled answer "
            "to the same question (slide_verified false); nothing new is run for them"
        )
    outcome = await execute(agent, plan, journal=journal, settings=settings, log=log)
    outcome.adopted, outcome.set_aside = len(plan.adopted), plan.set_aside
    outcome.kept_unverified = plan.kept_unverified
    latest = journal.read()
    available = [for_item(latest[key], item) for key, item in plan.available if key in latest]
    outcome.rows = available + plan.unavailable
    return outcome


async def execute(
    agent: Agent,
    plan: RunPlan,
    *,
    journal: Journal,
    settings: BatchSettings,
    log: Callable[[str], None],
) -> BatchOutcome:
    """Run the plan's pending runs, ``settings.concurrency`` at a time, until done or over budget."""
    pending = plan.pending
    outcome = BatchOutcome(rows=[], total_runs=plan.total_runs, reused=plan.reused)
    # only the runs about to execute may replay: the replies of finished runs are read for their cost
    store = ReplyStore(replies_path(journal.path), {row_identity(base).key for base, _ in pending})
    own = PartitionLedger(journal.path)
    whole = ExperimentLedger(journal.path.parent) if settings.experiment_budget_usd > 0 else None
    board = HoldBoard(journal.path.parent, journal.path.stem) if whole is not None else None
    spent = 0.0  # paid by this batch's finished runs
    live: dict[int, RunReplies] = {}  # the runs started and not ended
    broken: list[str] = []  # the first failed journal write
    changed = asyncio.Event()  # a run ended: its reservation is released
    started = time.monotonic()
    finished = in_flight = 0
    semaphore = asyncio.Semaphore(max(1, settings.concurrency))

    budgeted = settings.budget_usd > 0 or settings.experiment_budget_usd > 0
    journalled = [_cost(r.get("cost_usd")) for r in journal.read().values()] if budgeted else []
    earlier = sum(journalled) / len(journalled) if journalled else 0.0

    def reserve() -> float:
        """Held for a run: its estimate, or the mean cost of the runs paid so far when that is higher."""
        return max(settings.reserve_usd, spent / finished if finished else 0.0, earlier)

    def held() -> float:
        """Reserved for this batch's runs in flight, less what each has paid so far."""
        return sum(max(0.0, reserve() - r.paid_usd) for r in live.values())

    def over_budget() -> tuple[str | None, int]:
        """Why the next run may not start (its reservation would pass a budget), or None; and how many
        other processes hold reservations under the experiment budget (they may free room)."""
        mine = held()
        for what, budget, ledger in (
            ("budget", settings.budget_usd, own),
            ("experiment budget", settings.experiment_budget_usd, whole),
        ):
            if budget > 0 and ledger is not None:
                paid = ledger.spent()
                if ledger.unpriced:  # a cap cannot be kept over replies of unknown cost
                    return (
                        f"{what} {usd_as_set(budget)} cannot be kept ({ledger.unpriced} reply(ies) or "
                        "run(s) of this result set have no price: their cost is unknown; budget_usd: 0 runs "
                        "uncapped)"
                    ), 0
                theirs, holders = board.others() if board is not None and ledger is whole else (0.0, 0)
                if paid >= budget or paid + mine + theirs + reserve() > budget:
                    return (
                        f"{what} {usd_as_set(budget)} reached (paid ${paid:.4f} so far"
                        + (f", ${mine:.4f} held for {len(live)} run(s) in flight" if live else "")
                        + (f", ${theirs:.4f} held by {holders} other cell(s) running" if holders else "")
                        + f", ${reserve():.4f} reserved per run)"
                    ), holders
        return None, 0

    def progress(final: bool = False) -> None:
        elapsed = time.monotonic() - started
        left = len(pending) - finished - outcome.not_started - outcome.waiting
        if final or not left:
            eta = "none left"
        elif finished:
            eta = f"ETA {_duration(elapsed / finished * left)}"
        else:
            eta = "ETA unknown (no run finished yet)"
        line = (
            f"{'finished' if final else 'progress'}: {finished}/{len(pending)} runs done, "
            f"{outcome.failed} failed, {in_flight} in flight"
            f"{f', {outcome.waiting} waiting on a provider batch' if outcome.waiting else ''} "
            f"({outcome.reused} reused from the journal, "
            f"{len(plan.unavailable)} without a slide), cost so far {usd_text(spent)}, "
            f"{_duration(elapsed)} elapsed, {eta}"
        )
        outcome.log_lines.append(line)
        log(line)
        if settings.on_progress is not None:
            settings.on_progress(
                {
                    "final": final,
                    "runs_done": finished,
                    "runs_to_do": len(pending),
                    "failed": outcome.failed,
                    "in_flight": in_flight,
                    "reused": outcome.reused,
                    "cost_usd_so_far": round(spent, 6),
                    "elapsed_s": round(elapsed, 1),
                    "eta_s": round(elapsed / finished * left, 1) if finished and left and not final else None,
                }
            )

    async def run_one(base: dict[str, Any], item: dict[str, Any], replies: RunReplies) -> None:
        nonlocal spent, finished, in_flight
        in_flight += 1
        identity = replies.identity
        try:
            row_base = {**base, "started_at": _now()}
            try:
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a cancellation (Ctrl-C)
                # that lands as the answer completes, and the batch would then run on to the end
                with running(identity), recording(replies):
                    async with asyncio.timeout(settings.item_timeout_s), _scope(settings):
                        answer = await agent.answer(agent_item(item), base["run_index"])
                kind = (answer.error_kind or AGENT_ERROR) if answer.error else None
                row = result_row(row_base, item, answer, kind, answer.error)
            except TimeoutError:
                row = result_row(
                    row_base, item, None, TIMEOUT, f"no answer within {settings.item_timeout_s}s"
                )
            except RunWaiting:  # its request waits in a provider batch: nothing to journal yet
                outcome.waiting += 1
                return
            except Exception as exc:  # an agent bug fails its own item, never the batch
                row = result_row(row_base, item, None, AGENT_ERROR, f"{type(exc).__name__}: {exc}")
            # what this execution paid: its stored replies (an agent without a reply store: its row)
            spent += replies.paid_usd if replies.recorded or replies.replayed else row["cost_usd"]
            finished += 1
            try:
                journal.append([row])
            except OSError as exc:  # the replies it paid for are in the reply store: a re-run replays them
                broken.append(f"cannot write the journal {journal.path}: {exc}")
                return
            outcome.executed += 1
            outcome.failed += row["error_kind"] in RETRYABLE
        finally:
            outcome.replayed_calls += replies.replayed
            live.pop(id(replies), None)
            if board is not None:
                board.hold(held())
            in_flight -= 1
            changed.set()
            semaphore.release()

    async def heartbeat() -> None:
        while True:
            await asyncio.sleep(settings.progress_every_s)
            progress()
            if board is not None:  # what the runs in flight have paid is in the ledger now
                board.hold(held())

    # agents that read slides before their first model call (GIANT's overview) start those reads for the
    # next ``concurrency`` runs ahead of their turn, so a run does not read while it holds a model slot
    prefetch = getattr(agent, "prefetch", None)
    prefetched = 0

    def read_ahead(upto: int) -> None:
        nonlocal prefetched
        while prefetch is not None and prefetched < min(upto, len(pending)):
            prefetch(agent_item(pending[prefetched][1]))
            prefetched += 1

    beat = asyncio.create_task(heartbeat())
    tasks: list[asyncio.Task] = []
    try:
        for index, (base, item) in enumerate(pending):
            read_ahead(index + 1 + max(1, settings.concurrency))
            await semaphore.acquire()
            while not (broken or store.broken):
                with board.locked() if board is not None else contextlib.nullcontext():
                    problem, others = over_budget()
                    if problem is None:  # its reservation recorded before another process looks
                        replies = RunReplies(store, row_identity(base))
                        live[id(replies)] = replies  # held from now: the task starts at the next wait
                        if board is not None:
                            board.hold(held())
                        break
                if not (live or others):
                    break
                # runs in flight (here or in other cells) may cost less than held: wait for one to end
                changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), None if not others else OTHERS_POLL_S)
            if broken or store.broken:
                semaphore.release()
                outcome.not_started = len(pending) - index
                break
            if problem is not None:
                semaphore.release()
                outcome.budget_stopped = True
                outcome.not_started = len(pending) - index
                log(
                    f"{problem}: {outcome.not_started} runs not started; "
                    "re-materialize with a higher budget to continue"
                )
                break
            tasks.append(asyncio.create_task(run_one(base, item, replies)))
        await asyncio.gather(*tasks)
    finally:
        beat.cancel()
        for task in tasks:
            task.cancel()
        if board is not None:
            board.close()
    outcome.cost_usd_new = spent
    outcome.billed_usd = own.billed()  # NaN when a reply has no price
    progress(final=True)
    failure = (broken or [store.broken])[0]
    if failure:
        raise StoreWriteFailed(
            f"{failure}. No new run was started after it ({outcome.not_started} not started); what was "
            f"paid is kept in {store.path if not store.broken else 'the journal'}. Free the space or fix "
            "the file, then materialize again: answered requests are replayed, not paid again"
        )
    return outcome


def _cost(value: Any) -> float:
    """A journalled run's cost for the reservation: 0 when missing or unknown (NaN)."""
    try:
        usd = float(value or 0.0)
    except (TypeError, ValueError):
        return 0.0
    return usd if usd == usd else 0.0
