"""The batch sensor: polls the provider batches that cells wait on and launches a cell when one ends.

With ``batch: true`` and ``batch_wait: detach`` a materialization of ``predictions`` submits one round
of batches and ends; the batch ids are in the cell's batch store beside its journal
(``journals/<config_hash>/<benchmark>.batches/``). This sensor, run by the daemon, looks at every batch
not yet ended at most every ``minimum_interval_seconds`` (and each no more often than its experiment's
``batch_poll_s``), and when one has ended requests a run of the cell, which reads the answers, advances
every run one step and submits the next round, or finishes the cell. Nothing but the daemon has to stay
up while the provider works.

One launched run per cell at a time (a round split into several batches launches one run, not one per
batch). The sensor remembers, in its cursor, the run it launched for each cell; when that run failed or
was cancelled (a 500 on a download, a killed process: the batch is still open in the store, or the
answers are stored and the next round was never submitted), it launches the cell again under a new run
key (``batch-<batch id>-<attempt>``), up to ``MAX_LAUNCHES`` times, then says in its skip reason and
log that the cell cannot go on by itself, naming the last run and what to do.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path
from typing import Any

from dagster import (
    DagsterRunStatus,
    DefaultSensorStatus,
    JobDefinition,
    RunRequest,
    RunsFilter,
    SensorEvaluationContext,
    SensorResult,
    sensor,
)

from giant_assets.agents.providers.retry import RetryPolicy
from giant_assets.core.interrupts import run_interruptible
from giant_assets.core.secrets import redact_secrets
from giant_assets.core.settings import sensor_interval
from giant_assets.experiments.declared import DeclaredExperiments, ExperimentsFileError
from giant_assets.platform.resources import ExperimentsResource, StorageResource


def stores(root: Path) -> list[Any]:
    """Every cell's batch store under ``root``'s journals, each read once."""
    from giant_assets.agents.providers.batching import BatchStore

    return [BatchStore(folder) for folder in sorted(root.glob("journals/*/*.batches"))]


def open_batches(root: Path, found: list[Any] | None = None) -> list[dict[str, Any]]:
    """Every batch not yet ended under ``root``'s journals (or of the stores ``found``), with its store
    folder."""
    read = stores(root) if found is None else found
    return [record | {"folder": str(s.folder)} for s in read for record in s.open_batches()]


ORPHAN_AFTER_S = 600.0  # a round's create takes seconds: an intent this old without a batch lost its process


def orphaned_rounds(
    root: Path, now: float | None = None, found: list[Any] | None = None
) -> list[dict[str, Any]]:
    """Rounds under ``root``'s journals (or of the stores ``found``) whose process stopped between
    announcing the round and recording its batch (an intent without a batch record, older than
    ``ORPHAN_AFTER_S``): the sensor cannot tell whether that run is still going, so it names them and
    the user materializes the cell again, which adopts the batch (or submits the round) before
    anything else."""
    now = time.time() if now is None else now
    out = []
    for store in stores(root) if found is None else found:
        for intent in store.unresolved_intents():
            if now - intent["at"] >= ORPHAN_AFTER_S:
                out.append(intent | {"folder": str(store.folder)})
    return out


MAX_LAUNCHES = 3  # runs launched for one cell in a row that fail before the sensor stops relaunching it
STOPPED = {DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED}
# a launched run still shown running this long after its launch, while neither its journal nor its batch
# store is locked (a run holds both while its runs go): its process died unseen (kill -9; the default run
# launcher does not notice), and the cell is launched again. A run that never started (STARTING when its
# daemon was killed) is failed sooner by Dagster's run monitoring (dagster_home/dagster.yaml), and then
# relaunched like any failed run
STUCK_AFTER_S = 900.0


def _unlocked(folder: Path) -> bool:
    """Neither the cell's journal lock nor its batch store lock is held by a live process now."""
    from giant_assets.runs.guard import lock_path

    for path in (lock_path(folder.with_suffix(".jsonl")), folder / "store.lock"):
        if not path.exists():
            continue
        fd = os.open(path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
        except BlockingIOError:
            return False
        finally:
            os.close(fd)
    return True


def _last_run(context: SensorEvaluationContext, run_key: str) -> Any:
    """The run launched under ``run_key`` (None if the instance has none yet)."""
    runs = context.instance.get_runs(filters=RunsFilter(tags={"dagster/run_key": run_key}), limit=1)
    return runs[0] if runs else None


def contradiction(record: dict[str, Any], shown: str) -> str:
    """The line naming a batch that a look showed ended and a later look shows ``shown``."""
    seen = record.get("seen_ended") or {}
    at = time.strftime("%Y-%m-%d %H:%M", time.gmtime(seen.get("at") or 0))
    return (
        f"{record.get('partition') or record.get('folder', '')}: batch {record['batch_id']} contradicts "
        f"itself: shown ended ({seen.get('status')}) at {at} UTC, now {shown}; held as ended, its results "
        "read where the ended look named them"
    )


def look_seen(record: dict[str, Any], status: Any) -> str | None:
    """Keep what a look at the batch of ``record`` (with its store ``folder``) showed: an ended look
    remembered in the store (an ended batch stays ended); a look showing running a batch seen ended
    before noted there too, and the line naming it returned."""
    from giant_assets.agents.providers.batching import BatchStore

    store = BatchStore(Path(record["folder"]))
    if status.ended:
        store.remember_end(record["batch_id"], status.seen())
        return None
    if "seen_ended" not in record:
        return None
    store.note_contradiction(record["batch_id"], status.status)
    return contradiction(record, status.status)


async def _ended(
    batches: list[dict[str, Any]], experiments: DeclaredExperiments
) -> tuple[dict[str, str], list[str]]:
    """batch id -> the provider's status, for the batches that have ended (errors as 'error: ...'),
    and the lines naming batches that contradict themselves (ended before, running now)."""
    from giant_assets.agents.providers import make_chat_model
    from giant_assets.agents.providers.batching import batch_client
    from giant_assets.agents.providers.retry import RetryPolicy

    # a tick is bounded: a few quick attempts; a batch still failing is looked at next tick
    SENSOR_RETRY = RetryPolicy(max_attempts=3, base_delay_s=0.5, max_total_wait_s=5.0)  # noqa: N806
    ended: dict[str, str] = {}
    contradicted: list[str] = []
    by_experiment: dict[str, list[dict[str, Any]]] = {}
    for b in batches:
        by_experiment.setdefault(b.get("experiment", ""), []).append(b)
    for name, group in by_experiment.items():
        try:
            chat = make_chat_model(experiments.get(name), None)
        except Exception as exc:  # an experiment renamed or a key missing in the daemon's environment
            for b in group:
                ended[b["batch_id"]] = f"error: {type(exc).__name__}: {exc}"
            continue
        try:
            client = batch_client(chat, SENSOR_RETRY)
            for b in group:
                try:
                    status = await client.status(b["batch_id"])
                except Exception as exc:  # looked at again next tick; the others are still looked at
                    ended[b["batch_id"]] = f"error: {type(exc).__name__}: {exc}"[:300]
                    continue
                line = look_seen(b, status)
                if line:
                    contradicted.append(line)
                if status.ended or "seen_ended" in b:  # an ended batch stays ended
                    ended[b["batch_id"]] = status.status if status.ended else b["seen_ended"]["status"]
        finally:
            await chat.aclose()
    return ended, contradicted


def _poll_s(experiments: DeclaredExperiments, batch: dict[str, Any]) -> float:
    try:
        return experiments.get(batch.get("experiment", "")).batch_poll_s
    except Exception:  # a removed experiment: look at the default pace (its error is reported)
        return 60.0


def make_batch_rounds_sensor(job: JobDefinition):
    """The sensor, launching ``job`` (one cell end to end) for the cell whose batch ended."""

    @sensor(
        name="batch_rounds_sensor",
        job=job,
        minimum_interval_seconds=sensor_interval(30),
        default_status=DefaultSensorStatus.RUNNING,
    )
    def batch_rounds_sensor(
        context: SensorEvaluationContext, storage: StorageResource, experiments: ExperimentsResource
    ):
        """Launches a cell of the results grid when a provider batch it waits on has ended."""
        found = stores(storage.root)
        batches = open_batches(storage.root, found)
        orphans = [
            f"{o.get('partition') or o['folder']}: round {o['round_tag']} of "
            f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime(o['at']))} UTC has no recorded batch (its process "
            "stopped while submitting): materialize the cell again to adopt it"
            for o in orphaned_rounds(storage.root, found=found)
        ]
        for line in orphans + [f"batch store: {p}" for s in found for p in s.problems]:
            context.log.warning(line)
        state = json.loads(context.cursor or "{}")
        if "looked" not in state:  # a cursor of before launches were remembered: batch id -> time
            state = {"looked": state, "launched": {}}
        looked, launched = state["looked"], state["launched"]
        requests, notes = _relaunches(context, launched, batches)
        now = time.time()
        due = [
            b
            for b in batches
            if not b.get("cancel_requested") and now - looked.get(b["batch_id"], 0) >= _poll_s(experiments, b)
        ]
        ended, contradicted = run_interruptible(_ended(due, experiments)) if due else ({}, [])
        looked = {b["batch_id"]: (now if b in due else looked.get(b["batch_id"], 0)) for b in batches}
        waiting, errors = [], []
        for b in batches:
            status = ended.get(b["batch_id"])
            partition = b.get("partition")
            if b.get("cancel_requested"):
                continue  # cancelled by the user: the cell waits for its next run by hand
            since = time.strftime("%Y-%m-%d %H:%M", time.gmtime(b.get("submitted_at") or 0))
            if status is None:
                waiting.append(f"{partition}: {b['batch_id']} since {since} UTC")
            elif status.startswith("error"):
                errors.append(f"{partition}: {b['batch_id']}: {status}")
            elif partition and launched.get(partition, {"finished": True}).get("finished"):
                # one run per cell at a time, however many of its batches ended; a batch still open after
                # a run that succeeded (it never stored it) gets a new run key, not a skipped one
                last = launched.get(partition, {})
                attempt = last["attempt"] + 1 if last.get("batch_id") == b["batch_id"] else 1
                key = f"batch-{b['batch_id']}-{attempt}"
                launched[partition] = {"run_key": key, "attempt": attempt, "batch_id": b["batch_id"],
                                       "at": now, "folder": b["folder"]}  # fmt: skip
                requests.append(RunRequest(run_key=key, partition_key=partition))
        errors += contradicted
        for line in errors + notes:
            context.log.warning(line)
        summary = f"{len(waiting)} batch(es) running: " + "; ".join(waiting[:20]) if waiting else ""
        cursor = json.dumps({"looked": looked, "launched": launched})
        if requests:
            return SensorResult(run_requests=requests, cursor=cursor)
        if not batches and not notes:
            reason = "no provider batch is open" + ("; " + "; ".join(orphans) if orphans else "")
            return SensorResult(skip_reason=reason, cursor=cursor)
        reason = (summary or "no batch ended") + "".join(f"; {line}" for line in errors + notes + orphans)
        return SensorResult(skip_reason=reason, cursor=cursor)

    return batch_rounds_sensor


def _relaunches(
    context: SensorEvaluationContext, launched: dict[str, dict[str, Any]], batches: list[dict[str, Any]]
) -> tuple[list[RunRequest], list[str]]:
    """Run requests for cells whose launched run stopped (failed or cancelled) before the cell went on,
    and notes on cells that cannot go on. Updates ``launched``: a finished run's cell is forgotten (its
    next ended batch launches it again), a running one is kept (no second run of the cell meanwhile)."""
    requests, notes = [], []
    for partition, entry in list(launched.items()):
        run = _last_run(context, entry["run_key"])
        if entry.get("finished") or run is None:
            continue
        dead = (
            not run.is_finished
            and time.time() - entry.get("at", 0) >= STUCK_AFTER_S
            and _unlocked(Path(entry.get("folder", "")))
        )
        if not run.is_finished and not dead:
            continue  # still running: one run of the cell at a time
        latest = context.instance.get_runs(filters=RunsFilter(tags={"dagster/partition": partition}), limit=1)
        if latest and latest[0].run_id != run.run_id and latest[0].status == DagsterRunStatus.SUCCESS:
            entry["finished"] = True  # materialized by hand since: the cell went on
            continue
        if not dead and run.status not in STOPPED:
            entry["finished"] = True  # it went on: its next round's batches launch it when they end
            continue
        if entry["attempt"] >= MAX_LAUNCHES:
            notes.append(
                f"{partition}: cannot go on by itself: the last {MAX_LAUNCHES} runs launched for it stopped "
                f"({'died unseen' if dead else run.status.value}; last run {run.run_id}). Read that run's "
                "error, fix the cause, then materialize the cell by hand (paid answers are kept in its "
                "batch store)"
            )
            continue
        attempt = entry["attempt"] + 1
        key = f"batch-{entry['batch_id']}-{attempt}"
        launched[partition] = entry | {"run_key": key, "attempt": attempt, "at": time.time()}
        requests.append(RunRequest(run_key=key, partition_key=partition))
        notes.append(
            f"{partition}: run {run.run_id} launched for batch {entry['batch_id']} "
            f"{'died unseen' if dead else run.status.value}: "
            f"launching the cell again (attempt {attempt} of {MAX_LAUNCHES})"
        )
    return requests, notes


# a person waits on `giant-experiments batches`: one retry, not the poll's patience
LISTING_RETRY = RetryPolicy(max_attempts=2, max_total_wait_s=5.0)


async def review_open(
    root: Path,
    experiments: DeclaredExperiments,
    name: str | None,
    cancel: bool,
    found: list[Any] | None = None,
) -> list[dict[str, Any]]:
    """The open batches (of experiment ``name``, or all; of the stores ``found``, else of every store
    under ``root``) with the provider's status now; ``cancel`` cancels each (the provider then ends it,
    and the next run of its cell stores what finished)."""
    from giant_assets.agents.providers import make_chat_model
    from giant_assets.agents.providers.batching import BatchStore, batch_client

    out = []
    for b in open_batches(root, found):
        if name and b.get("experiment") != name:
            continue
        try:
            exp = experiments.get(b.get("experiment", ""))
        except ExperimentsFileError as exc:
            out.append(b | {"problem": f"{exc}; the provider was not asked (its settings are not declared)"})
            continue
        try:
            chat = make_chat_model(exp, None)
        except Exception as exc:  # e.g. the key is not set: say so for this batch, list the others
            out.append(b | {"problem": redact_secrets(f"{type(exc).__name__}: {exc}")})
            continue
        try:
            client = batch_client(chat, LISTING_RETRY)
            if cancel:
                await client.cancel(b["batch_id"])
                # the sensor leaves it alone; the cell's next run stores what finished and re-sends the rest
                record = {k: v for k, v in b.items() if k != "folder"} | {"cancel_requested": time.time()}
                BatchStore(Path(b["folder"])).record_batch(record)
            status = await client.status(b["batch_id"])
        except Exception as exc:  # the provider is down or refuses: this batch's line says why
            cause = exc.__cause__ or exc
            why = f"{type(exc).__name__} ({type(cause).__name__}: {cause})" if cause is not exc else repr(exc)
            out.append(b | {"problem": redact_secrets(f"the provider could not be asked: {why}")})
            continue
        finally:
            await chat.aclose()
        line = look_seen(b, status)  # an ended look remembered; a contradiction of one named
        ended = status.ended or "seen_ended" in b  # an ended batch stays ended
        out.append(b | {"provider_status": status.status, "counts": status.counts, "ended": ended}
                   | ({"contradiction": line} if line else {}))  # fmt: skip
    return out
