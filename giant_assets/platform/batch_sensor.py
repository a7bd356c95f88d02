"""The batch sensor: polls the provider batches that cells wait on and launches a cell when one ends.

With ``batch: true`` and ``batch_wait: detach`` a materialization of ``predictions`` submits one round
of batches and ends; the batch ids are in the cell's batch store beside its journal
(``journals/<config_hash>/<benchmark>.batches/``). This sensor, run by the daemon, looks at every batch
not yet ended at most every ``minimum_interval_seconds`` (and each no more often than its experiment's
``batch_poll_s``), and when one has ended requests a run of the cell (run key: the batch id, so once),
which reads the answers, advances every run one step and submits the next round, or finishes the cell.
Nothing but the daemon has to stay up while the provider works.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from dagster import (
    DefaultSensorStatus,
    JobDefinition,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    sensor,
)

from giant_assets.core.secrets import redact_secrets
from giant_assets.experiments.declared import ExperimentsFileError
from giant_assets.platform.resources import ExperimentsResource, StorageResource


def open_batches(root: Path) -> list[dict[str, Any]]:
    """Every batch not yet ended under ``root``'s journals, with its store folder."""
    from giant_assets.agents.providers.batching import BatchStore

    out = []
    for folder in sorted(root.glob("journals/*/*.batches")):
        for record in BatchStore(folder).open_batches():
            out.append(record | {"folder": str(folder)})
    return out


ORPHAN_AFTER_S = 600.0  # a round's create takes seconds: an intent this old without a batch lost its process


def orphaned_rounds(root: Path, now: float | None = None) -> list[dict[str, Any]]:
    """Rounds under ``root``'s journals whose process stopped between announcing the round and recording
    its batch (an intent without a batch record, older than ``ORPHAN_AFTER_S``): the sensor cannot tell
    whether that run is still going, so it names them and the user materializes the cell again, which
    adopts the batch (or submits the round) before anything else."""
    from giant_assets.agents.providers.batching import BatchStore

    now = time.time() if now is None else now
    out = []
    for folder in sorted(root.glob("journals/*/*.batches")):
        for intent in BatchStore(folder).unresolved_intents():
            if now - intent["at"] >= ORPHAN_AFTER_S:
                out.append(intent | {"folder": str(folder)})
    return out


async def _ended(batches: list[dict[str, Any]], experiments: ExperimentsResource) -> dict[str, str]:
    """batch id -> the provider's status, for the batches that have ended; errors as 'error: ...'."""
    from giant_assets.agents.providers import make_chat_model
    from giant_assets.agents.providers.batching import batch_client

    ended: dict[str, str] = {}
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
            client = batch_client(chat)
            for b in group:
                status = await client.status(b["batch_id"])
                if status.ended:
                    ended[b["batch_id"]] = status.status
        finally:
            await chat.aclose()
    return ended


def _poll_s(experiments: ExperimentsResource, batch: dict[str, Any]) -> float:
    try:
        return experiments.get(batch.get("experiment", "")).batch_poll_s
    except Exception:  # a removed experiment: look at the default pace (its error is reported)
        return 60.0


def make_batch_rounds_sensor(job: JobDefinition):
    """The sensor, launching ``job`` (one cell end to end) for the cell whose batch ended."""

    @sensor(
        name="batch_rounds_sensor",
        job=job,
        minimum_interval_seconds=30,
        default_status=DefaultSensorStatus.RUNNING,
    )
    def batch_rounds_sensor(
        context: SensorEvaluationContext, storage: StorageResource, experiments: ExperimentsResource
    ):
        """Launches a cell of the results grid when a provider batch it waits on has ended."""
        batches = open_batches(storage.root)
        orphans = [
            f"{o.get('partition') or o['folder']}: round {o['round_tag']} of "
            f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime(o['at']))} UTC has no recorded batch (its process "
            "stopped while submitting): materialize the cell again to adopt it"
            for o in orphaned_rounds(storage.root)
        ]
        for line in orphans:
            context.log.warning(line)
        if not batches:
            reason = "no provider batch is open" + ("; " + "; ".join(orphans) if orphans else "")
            return SensorResult(skip_reason=reason, cursor="{}")
        looked = json.loads(context.cursor or "{}")
        now = time.time()
        due = [
            b
            for b in batches
            if not b.get("cancel_requested") and now - looked.get(b["batch_id"], 0) >= _poll_s(experiments, b)
        ]
        ended = asyncio.run(_ended(due, experiments))
        looked = {b["batch_id"]: (now if b in due else looked.get(b["batch_id"], 0)) for b in batches}
        requests, waiting, errors = [], [], []
        for b in batches:
            status = ended.get(b["batch_id"])
            if b.get("cancel_requested"):
                continue  # cancelled by the user: the cell waits for its next run by hand
            since = time.strftime("%Y-%m-%d %H:%M", time.gmtime(b.get("submitted_at") or 0))
            if status is None:
                waiting.append(f"{b.get('partition')}: {b['batch_id']} since {since} UTC")
            elif status.startswith("error"):
                errors.append(f"{b.get('partition')}: {b['batch_id']}: {status}")
            elif b.get("partition"):
                requests.append(
                    RunRequest(run_key=f"batch-ended-{b['batch_id']}", partition_key=b["partition"])
                )
        for line in errors:
            context.log.warning(line)
        summary = f"{len(waiting)} batch(es) running: " + "; ".join(waiting[:20]) if waiting else ""
        cursor = json.dumps(looked)
        if requests:
            return SensorResult(run_requests=requests, cursor=cursor)
        reason = (summary or "no batch ended") + "".join(f"; {line}" for line in errors + orphans)
        return SensorResult(skip_reason=reason, cursor=cursor)

    return batch_rounds_sensor


async def review_open(
    root: Path, experiments: ExperimentsResource, name: str | None, cancel: bool
) -> list[dict[str, Any]]:
    """The open batches (of experiment ``name``, or all) with the provider's status now; ``cancel``
    cancels each (the provider then ends it, and the next run of its cell stores what finished)."""
    from giant_assets.agents.providers import make_chat_model
    from giant_assets.agents.providers.batching import BatchStore, batch_client

    out = []
    for b in open_batches(root):
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
            client = batch_client(chat)
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
        out.append(b | {"provider_status": status.status, "counts": status.counts})
    return out
