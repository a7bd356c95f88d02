"""Batch mode: every model request of an experiment goes through the provider's batch API, at half price.

A run's requests are the same bytes whatever the transport, so each is named by a digest of its wire
body (its ``custom_id``) and answered from a durable store once any batch has answered it. A *round*
collects the next request of every run that is waiting for the model into batches (split at the
provider's request and byte limits), submits them and waits for them to end: a GIANT run advances one
step per round, a single-call baseline finishes in one.

Two ways to wait (``BatchRound.mode``):

- ``hold``: the process polls until the round's batches end, then the runs go on to their next round.
- ``detach``: the round is submitted and every waiting run stops with ``BatchPending`` (nothing is
  journalled for it); a later call of the same runs (the next materialization, launched by the batch
  sensor when a batch ends) replays them: every request answered before is answered from the store at
  no cost, and the runs stop again at their first request still open, or go on.

Nothing paid for is asked again: the store (append-only JSONL, fsynced) records each batch before it
is polled and each answer as soon as its batch ends; a request whose answer is stored, or that sits in
a batch not yet ended, is never submitted again. Lines that come back errored or expired go into the
next round, up to ``max_line_attempts`` submissions, then fail their run with a ``ProviderError``.

A batch the provider accepted but whose id was never recorded (the process killed while the create's
reply was on its way, or the create timed out) is *adopted*, not paid for again: each batch is
preceded by a durable intent (its round tag and custom ids, ``intents.jsonl``), and once per process,
before its first request is answered, every intent without a batch record is looked up at the
provider (``BatchRound.adopt``): OpenAI by the ``giant_round`` metadata the batch carries, Anthropic
(no metadata) by the one unrecorded batch created since the intent with the same number of requests.
A batch found is recorded as if just submitted; none found (or, Anthropic, several that fit) resolves
the intent and its requests go into a normal round.
"""

from __future__ import annotations

import abc
import asyncio
import contextvars
import hashlib
import io
import json
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from giant_assets.agents.providers.errors import ProviderError
from giant_assets.batch.records import RunWaiting

BATCH_DISCOUNT = 0.5  # both providers bill batch tokens at half the synchronous rate
OPENAI_LIMITS = (50_000, 190 * 2**20)  # requests, bytes per input file (published: 50,000 and 200 MB)
ANTHROPIC_LIMITS = (100_000, 240 * 2**20)  # requests, bytes per batch (published: 100,000 and 256 MB)
ENDED = "ended"
# how far the provider's clock may be from ours: a batch created from an intent is listed back to this
# much before the intent, and (Anthropic) counts as a candidate from then on
CLOCK_SLACK_S = 60.0
_RUN: contextvars.ContextVar[object | None] = contextvars.ContextVar("batch_run", default=None)


class BatchPending(RunWaiting):
    """The run's next request waits in a submitted batch (detach mode): the run stops, unjournalled."""

    def __init__(self, batch_id: str) -> None:
        super().__init__(f"waiting on batch {batch_id}")
        self.batch_id = batch_id


def custom_id(endpoint: str, body: dict[str, Any]) -> str:
    """The request's name in batches: a digest of its endpoint and wire body (64 chars: both APIs' limit)."""
    blob = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return "g" + hashlib.sha256(endpoint.encode() + b"\0" + blob).hexdigest()[:63]


# ---------------------------------------------------------------- the durable store


class BatchStore:
    """One result set's batches on one benchmark: ``batches.jsonl`` (each batch and its status),
    ``answers.jsonl`` (each line's outcome) and ``intents.jsonl`` (each batch about to be submitted:
    its round tag and custom ids, then how a search for it was resolved), all append-only; the latest
    record per key wins. A folder written before intents existed simply has none."""

    def __init__(self, folder: Path, partition: dict[str, str] | None = None) -> None:
        self.folder = Path(folder)
        self.partition = partition or {}  # experiment and benchmark, for the sensor
        self.batches: dict[str, dict[str, Any]] = {}
        self.answers: dict[str, dict[str, Any]] = {}
        self._open_by_cid: dict[str, str] = {}
        self.submissions: dict[str, int] = {}
        self.intents: dict[str, dict[str, Any]] = {}  # round tag -> intent, merged with its resolution
        self._load()

    def _read(self, name: str) -> list[dict[str, Any]]:
        path = self.folder / name
        if not path.exists():
            return []
        rows = []
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue  # a torn last line of a killed writer
                if isinstance(row, dict):
                    rows.append(row)
        return rows

    def _load(self) -> None:
        for row in self._read("batches.jsonl"):
            if isinstance(row.get("batch_id"), str):  # a row without one (edited by hand) names no batch
                self._index_batch(row)
        for row in self._read("answers.jsonl"):
            self.answers[row["custom_id"]] = row
        for row in self._read("intents.jsonl"):
            self.intents[row["round_tag"]] = self.intents.get(row["round_tag"], {}) | row

    def _index_batch(self, row: dict[str, Any]) -> None:
        first = row["batch_id"] not in self.batches
        self.batches[row["batch_id"]] = row
        for cid in row.get("custom_ids", []):
            if first:
                self.submissions[cid] = self.submissions.get(cid, 0) + 1
            if row.get("status") == ENDED:
                self._open_by_cid.pop(cid, None)
            else:
                self._open_by_cid[cid] = row["batch_id"]

    def _append(self, name: str, rows: list[dict[str, Any]]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / name, "a", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def record_batch(self, row: dict[str, Any]) -> None:
        row = self.partition | row
        self._append("batches.jsonl", [row])
        self._index_batch(row)

    def record_answers(self, rows: list[dict[str, Any]]) -> None:
        self._append("answers.jsonl", rows)
        for row in rows:
            self.answers[row["custom_id"]] = row

    def record_intent(self, tag: str, custom_ids: list[str]) -> None:
        """Before a batch is submitted: what it holds, so a batch whose id is lost can be found."""
        self._append_intent(self.partition | {"round_tag": tag, "custom_ids": custom_ids, "at": time.time()})

    def resolve_intent(self, tag: str, how: str, **details: Any) -> None:
        """The search for an intent's batch is over with none adopted (``not_found``, ``ambiguous``);
        an adopted batch's record resolves its intent by its round tag."""
        self._append_intent({"round_tag": tag, "resolved": how, "resolved_at": time.time()} | details)

    def _append_intent(self, row: dict[str, Any]) -> None:
        self._append("intents.jsonl", [row])
        self.intents[row["round_tag"]] = self.intents.get(row["round_tag"], {}) | row

    def unresolved_intents(self) -> list[dict[str, Any]]:
        """Intents with no batch recorded for their round tag and no search resolved, oldest first."""
        recorded = {b.get("round_tag") for b in self.batches.values()}
        rows = [
            i
            for tag, i in self.intents.items()
            if tag not in recorded and "resolved" not in i and "custom_ids" in i
        ]
        return sorted(rows, key=lambda i: i["at"])

    def open_batch(self, cid: str) -> str | None:
        return self._open_by_cid.get(cid)

    def open_batches(self) -> list[dict[str, Any]]:
        return [b for b in self.batches.values() if b.get("status") != ENDED]


# ---------------------------------------------------------------- the providers' batch APIs


@dataclass(frozen=True)
class BatchStatus:
    ended: bool
    status: str  # the provider's own status word
    counts: dict[str, int]


@dataclass(frozen=True)
class ListedBatch:
    """A batch as the provider lists it: enough to tell whether it is an intent's."""

    id: str
    created_at: float  # unix seconds, the provider's clock
    requests: int  # its number of requests
    tag: str | None  # the round tag it carries (OpenAI metadata); None where batches carry none


class BatchClient(abc.ABC):
    """One provider's batch API through its official SDK client."""

    limits: tuple[int, int]
    tagged: bool  # a batch carries the round tag it was submitted with (found by it after a restart)

    def __init__(self, client: Any, endpoint: str) -> None:
        self.client = client
        self.endpoint = endpoint  # the synchronous path each line stands for, e.g. /v1/responses

    @abc.abstractmethod
    async def submit(self, lines: list[tuple[str, dict[str, Any]]], tag: str) -> str:
        """Create a batch of (custom_id, body) lines; returns its id."""

    @abc.abstractmethod
    async def status(self, batch_id: str) -> BatchStatus: ...

    @abc.abstractmethod
    async def results(self, batch_id: str) -> list[dict[str, Any]]:
        """Each line's outcome: ``{custom_id, kind: succeeded|errored|expired|canceled, body | error}``."""

    @abc.abstractmethod
    async def cancel(self, batch_id: str) -> None: ...

    @abc.abstractmethod
    async def listed(self, since: float) -> list[ListedBatch]:
        """The account's batches created at or after ``since`` (unix seconds), newest first."""

    def line_bytes(self, cid: str, body: dict[str, Any]) -> int:
        return len(json.dumps({"custom_id": cid, "body": body})) + 80


class OpenAIBatches(BatchClient):
    """``/v1/files`` (purpose ``batch``), ``/v1/batches`` over ``/v1/responses`` or chat completions."""

    limits = OPENAI_LIMITS
    tagged = True
    TERMINAL = frozenset({"completed", "expired", "cancelled", "failed"})

    async def submit(self, lines: list[tuple[str, dict[str, Any]]], tag: str) -> str:
        jsonl = "".join(
            json.dumps({"custom_id": cid, "method": "POST", "url": self.endpoint, "body": body}) + "\n"
            for cid, body in lines
        ).encode()
        upload = await self.client.files.create(
            file=("giant-batch.jsonl", io.BytesIO(jsonl)), purpose="batch"
        )
        batch = await self.client.batches.create(
            input_file_id=upload.id,
            endpoint=self.endpoint,
            completion_window="24h",
            metadata={"giant_round": tag},
        )
        return batch.id

    async def status(self, batch_id: str) -> BatchStatus:
        batch = await self.client.batches.retrieve(batch_id)
        counts = batch.request_counts.model_dump() if batch.request_counts else {}
        return BatchStatus(batch.status in self.TERMINAL, batch.status, counts)

    async def results(self, batch_id: str) -> list[dict[str, Any]]:
        batch = await self.client.batches.retrieve(batch_id)
        out = []
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            content = await self.client.files.content(file_id)
            for raw in content.text.splitlines():
                line = json.loads(raw)
                response, error = line.get("response"), line.get("error")
                if response and response.get("status_code", 500) < 400:
                    out.append(
                        {"custom_id": line["custom_id"], "kind": "succeeded", "body": response["body"]}
                    )
                elif response:
                    status = response.get("status_code")
                    out.append(
                        {
                            "custom_id": line["custom_id"],
                            "kind": "errored",
                            "status": status,
                            "error": json.dumps(response.get("body"))[:500],
                        }
                    )
                else:
                    code = (error or {}).get("code", "")
                    kind = (
                        "expired"
                        if code == "batch_expired"
                        else "canceled"
                        if "cancel" in code
                        else "errored"
                    )
                    out.append({"custom_id": line["custom_id"], "kind": kind, "error": str(error)[:500]})
        return out

    async def cancel(self, batch_id: str) -> None:
        await self.client.batches.cancel(batch_id)

    async def listed(self, since: float) -> list[ListedBatch]:
        out = []
        async for batch in self.client.batches.list(limit=100):  # newest first, page by page
            if batch.created_at < since:
                break
            counts = batch.request_counts
            tag = (batch.metadata or {}).get("giant_round")
            out.append(ListedBatch(batch.id, float(batch.created_at), counts.total if counts else 0, tag))
        return out


class AnthropicBatches(BatchClient):
    """``/v1/messages/batches`` and its results."""

    limits = ANTHROPIC_LIMITS
    tagged = False  # message batches carry no metadata: found by creation time and request count

    async def submit(self, lines: list[tuple[str, dict[str, Any]]], tag: str) -> str:
        requests = [{"custom_id": cid, "params": body} for cid, body in lines]
        batch = await self.client.messages.batches.create(requests=requests)
        return batch.id

    async def status(self, batch_id: str) -> BatchStatus:
        batch = await self.client.messages.batches.retrieve(batch_id)
        counts = batch.request_counts.model_dump() if batch.request_counts else {}
        return BatchStatus(batch.processing_status == "ended", batch.processing_status, counts)

    async def results(self, batch_id: str) -> list[dict[str, Any]]:
        out = []
        async for line in await self.client.messages.batches.results(batch_id):
            result = line.result
            row: dict[str, Any] = {"custom_id": line.custom_id, "kind": result.type}
            if result.type == "succeeded":
                row["body"] = result.message.model_dump(mode="json", exclude_none=True)
            elif result.type == "errored":
                row["error"] = json.dumps(result.error.model_dump(mode="json"))[:500]
            out.append(row)
        return out

    async def cancel(self, batch_id: str) -> None:
        await self.client.messages.batches.cancel(batch_id)

    async def listed(self, since: float) -> list[ListedBatch]:
        out = []
        async for batch in self.client.messages.batches.list(limit=100):  # newest first
            created = batch.created_at.timestamp()
            if created < since:
                break
            c = batch.request_counts
            total = c.processing + c.succeeded + c.errored + c.canceled + c.expired
            out.append(ListedBatch(batch.id, created, total, None))
        return out


def batch_client(model: Any) -> BatchClient:
    """The batch API of an ``SDKChatModel``'s provider and wire format, over the model's own SDK client."""
    if model.provider == "anthropic":
        return AnthropicBatches(model._client, "/v1/messages")
    return OpenAIBatches(model._client, "/v1" + model.endpoint)


def intent_candidates(
    intent: dict[str, Any], listed: list[ListedBatch], named: set[str], until: float, tagged: bool
) -> list[ListedBatch]:
    """The listed batches that may be ``intent``'s, oldest first. Where batches carry their round tag
    (OpenAI): those with the intent's tag. Elsewhere (Anthropic): those no record of the store names
    (``named``), created from the intent's time to ``until`` (the store's next record after it: a later
    record means the create had returned), both widened by the clock slack, with as many requests."""
    if tagged:
        found = [b for b in listed if b.tag == intent["round_tag"]]
    else:
        start, end = intent["at"] - CLOCK_SLACK_S, until + CLOCK_SLACK_S
        n = len(intent["custom_ids"])
        found = [b for b in listed if b.id not in named and start <= b.created_at <= end and b.requests == n]
    return sorted(found, key=lambda b: b.created_at)


# ---------------------------------------------------------------- rounds


class BatchRound:
    """Collects the next request of every live run into batches, one round at a time."""

    def __init__(
        self,
        client: BatchClient,
        store: BatchStore,
        *,
        mode: str = "hold",
        poll_s: float = 60.0,
        max_requests: int | None = None,
        max_line_attempts: int = 3,
        settle_s: float = 1.0,
        log: Callable[[str], None] = print,
    ) -> None:
        if mode not in ("hold", "detach"):
            raise ValueError(f"batch mode {mode!r}: use 'hold' or 'detach'")
        self.client = client
        self.store = store
        self.mode = mode
        self.poll_s = poll_s
        limit_n, self.max_bytes = client.limits
        self.max_requests = min(max_requests or limit_n, limit_n)
        self.max_line_attempts = max_line_attempts
        self.log = log
        self.live = 0
        self.settle_s = (
            settle_s  # a round closes once every live run has waited this long with no new request
        )
        self._waiting: dict[str, tuple[dict[str, Any], list[asyncio.Future]]] = {}
        self._runs_waiting: dict[object, int] = {}  # run -> its requests waiting for the round
        self._timer: asyncio.TimerHandle | None = None
        self._watchers: dict[str, asyncio.Task] = {}
        self.rounds = 0
        self.submitted_requests = 0
        self.pending_batches: set[str] = set()  # detach: batches the stopped runs wait on
        self.adopted: list[str] = []  # batches of an earlier process found by their intent
        self._adoption_done = False
        self._adoption_error: ProviderError | None = None
        self._adoption_lock = asyncio.Lock()

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Wrap one run: the round closes once every live run waits for the model (a run's concurrent
        requests, as the patch baseline makes, count it once and all go into the same round)."""
        self.live += 1
        token = _RUN.set(object())
        try:
            yield
        finally:
            _RUN.reset(token)
            self.live -= 1
            self._maybe_submit()

    async def request(self, body: dict[str, Any]) -> dict[str, Any]:
        """The reply body to one request: from the store, from an open batch, or from a new round."""
        await self.adopt()
        cid = custom_id(self.client.endpoint, body)
        while True:
            answer = self.store.answers.get(cid)
            if answer is not None and answer["kind"] == "succeeded":
                return answer["body"]
            if (
                answer is not None
                and answer["kind"] == "errored"
                and 400 <= (answer.get("status") or 0) < 500
            ):
                raise ProviderError(
                    f"batch line {cid[:12]} refused: {answer.get('error')}", answer.get("status")
                )
            submitted = self.store.submissions.get(cid, 0)
            open_id = self.store.open_batch(cid)
            if open_id is None and submitted >= self.max_line_attempts:
                kind = answer["kind"] if answer else "lost"
                raise ProviderError(
                    f"batch line {cid[:12]}: {kind} in each of {submitted} batches "
                    f"(max {self.max_line_attempts}): {(answer or {}).get('error', '')}"
                )
            if open_id is not None:
                await self._wait(open_id)
                continue
            future = asyncio.get_running_loop().create_future()
            self._waiting.setdefault(cid, (body, []))[1].append(future)
            run = _RUN.get()
            self._runs_waiting[run] = self._runs_waiting.get(run, 0) + 1
            self._maybe_submit()
            try:
                await future
            finally:
                self._runs_waiting[run] -= 1
                if not self._runs_waiting[run]:
                    del self._runs_waiting[run]

    async def adopt(self) -> None:
        """Once per process, before a request is answered or submitted: look up the batch of every
        intent that has no batch record (its process stopped between the provider accepting the batch
        and the record), and record the one found, so its requests wait on it instead of being paid
        for again. No intent pending: no call to the provider. The listing failing fails every request
        of this process (the next one looks again): submitting blind could pay twice."""
        if self._adoption_done:
            return
        async with self._adoption_lock:
            if self._adoption_done:
                return
            if self._adoption_error is not None:
                raise self._adoption_error
            pending = self.store.unresolved_intents()
            if pending:
                try:
                    listed = await self.client.listed(pending[0]["at"] - CLOCK_SLACK_S)
                except Exception as exc:
                    self._adoption_error = ProviderError(
                        f"looking up {len(pending)} batch(es) submitted before a restart failed: "
                        f"{type(exc).__name__}: {exc}"[:500]
                    )
                    raise self._adoption_error from exc
                self._adopt(pending, listed)
            self._adoption_done = True

    def _adopt(self, pending: list[dict[str, Any]], listed: list[ListedBatch]) -> None:
        named = set(self.store.batches)
        times = sorted(
            [i["at"] for i in self.store.intents.values() if "at" in i]
            + [b.get("submitted_at") or 0.0 for b in self.store.batches.values()]
        )
        for intent in pending:
            tag, cids = intent["round_tag"], intent["custom_ids"]
            until = next((t for t in times if t > intent["at"]), time.time())
            found = intent_candidates(intent, listed, named, until, self.client.tagged)
            if len(found) == 1 or (found and self.client.tagged):
                batch = found[0]  # tagged: several only if a create was repeated; the first is adopted
                self.store.record_batch(
                    {
                        "batch_id": batch.id,
                        "custom_ids": cids,
                        "status": "submitted",
                        "submitted_at": intent["at"],
                        "round_tag": tag,
                        "requests": len(cids),
                        "adopted": time.time(),
                    }
                )
                named.add(batch.id)
                self.adopted.append(batch.id)
                others = (
                    f" (also tagged {', '.join(b.id for b in found[1:])}: not adopted)" if found[1:] else ""
                )
                self.log(f"adopted batch {batch.id} of round {tag} submitted before a restart{others}")
            elif not found:
                self.store.resolve_intent(tag, "not_found")
                self.log(
                    f"round {tag}: the provider has no batch of it (the process stopped before one was "
                    f"accepted): its {len(cids)} request(s) go into a new round"
                )
            else:
                ids = [b.id for b in found]
                self.store.resolve_intent(tag, "ambiguous", candidates=ids)
                self.log(
                    f"round {tag}: {len(ids)} batches of {len(cids)} request(s) created since it was "
                    f"submitted before a restart ({', '.join(ids)}) could be it: none adopted, its "
                    "requests go into a new round, and whichever of them was this round's is paid "
                    "for twice"
                )

    async def _wait(self, batch_id: str) -> None:
        """Until the batch ends and its answers are stored; detach: one look, and stop if still running."""
        task = self._watchers.get(batch_id)
        if task is None:
            task = self._watchers[batch_id] = asyncio.ensure_future(self._watch(batch_id))
        if not await asyncio.shield(task):
            self.pending_batches.add(batch_id)
            raise BatchPending(batch_id)

    async def _watch(self, batch_id: str) -> bool:
        """Poll the batch (hold: until it ends; detach: once); store its answers when it has ended."""
        while True:
            status = await self.client.status(batch_id)
            if status.ended:
                results = await self.client.results(batch_id)
                seen = {r["custom_id"] for r in results}
                # a request of the record with no result line (expired, or not in the batch: an adopted
                # Anthropic batch that was another's) counts as expired: it goes into the next round,
                # at the cost of one of its max_line_attempts. Result lines of requests not in the record
                # are stored too: a custom_id is the digest of its request, so they answer that request.
                lost = [cid for cid in self.store.batches[batch_id].get("custom_ids", []) if cid not in seen]
                results += [{"custom_id": cid, "kind": "expired", "error": "no result line"} for cid in lost]
                for row in results:
                    row["batch_id"] = batch_id
                self.store.record_answers(results)
                record = self.store.batches[batch_id] | {
                    "status": ENDED,
                    "provider_status": status.status,
                    "ended_at": time.time(),
                    "counts": status.counts,
                }
                self.store.record_batch(record)
                failed = sum(r["kind"] != "succeeded" for r in results)
                self.log(
                    f"batch {batch_id} {status.status}: {len(results) - failed} answered, {failed} "
                    f"errored/expired/cancelled (re-sent next round, up to {self.max_line_attempts} times)"
                )
                return True
            if self.mode == "detach":
                self.log(f"batch {batch_id} {status.status} {status.counts}: runs stop until it ends")
                return False
            await asyncio.sleep(self.poll_s)

    def _maybe_submit(self) -> None:
        """(Re)start the settle timer while every live run waits; a new request restarts it."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._waiting and len(self._runs_waiting) >= self.live:
            self._timer = asyncio.get_running_loop().call_later(self.settle_s, self._close_round)

    def _close_round(self) -> None:
        self._timer = None
        if self._waiting and len(self._runs_waiting) >= self.live:
            requests, self._waiting = self._waiting, {}
            asyncio.ensure_future(self._submit_round(requests))

    async def _submit_round(self, requests: dict[str, tuple[dict[str, Any], list[asyncio.Future]]]) -> None:
        self.rounds += 1
        tag = uuid.uuid4().hex[:16]
        chunks = self._chunks([(cid, body) for cid, (body, _) in requests.items()])
        futures = [f for _, fs in requests.values() for f in fs]
        try:
            ids = []
            for n, chunk in enumerate(chunks):
                # durable before the provider sees the batch: a process killed before the record of
                # its id leaves this, and the next process adopts the batch instead of paying again
                self.store.record_intent(f"{tag}-{n}", [cid for cid, _ in chunk])
                batch_id = await self.client.submit(chunk, f"{tag}-{n}")
                self.store.record_batch(
                    {
                        "batch_id": batch_id,
                        "custom_ids": [cid for cid, _ in chunk],
                        "status": "submitted",
                        "submitted_at": time.time(),
                        "round_tag": f"{tag}-{n}",
                        "requests": len(chunk),
                    }
                )
                ids.append(batch_id)
            self.submitted_requests += len(requests)
            self.log(
                f"round {self.rounds}: {len(requests)} request(s) in {len(ids)} batch(es) {', '.join(ids)}"
            )
        except Exception as exc:  # the runs fail with the reason; nothing is half-recorded
            # the failed chunk's intent stays open: a create whose reply timed out may have been
            # accepted, and the next process looks for it
            error = ProviderError(f"batch submission failed: {type(exc).__name__}: {exc}"[:500])
            for future in futures:
                if not future.done():
                    future.set_exception(error)
            return
        for future in futures:
            if not future.done():
                future.set_result(None)  # each request loops: it now finds its open batch

    def _chunks(self, lines: list[tuple[str, dict[str, Any]]]) -> list[list[tuple[str, dict[str, Any]]]]:
        chunks: list[list[tuple[str, dict[str, Any]]]] = [[]]
        size = 0
        for cid, body in lines:
            n = self.client.line_bytes(cid, body)
            if chunks[-1] and (len(chunks[-1]) >= self.max_requests or size + n > self.max_bytes):
                chunks.append([])
                size = 0
            chunks[-1].append((cid, body))
            size += n
        return chunks


def attach(agent: Any, folder: Path, experiment: Any, log: Callable[[str], None]) -> BatchRound:
    """Switch ``agent``'s model calls to batches stored under ``folder`` and its prices to batch prices."""
    chat = getattr(agent, "chat", None)
    if chat is None or not hasattr(chat, "batch"):
        raise ValueError(f"batch: true: agent {experiment.agent!r} has no provider model to batch")
    store = BatchStore(folder, {"experiment": experiment.name})
    chat.batch = BatchRound(
        batch_client(chat),
        store,
        mode=experiment.batch_wait,
        poll_s=experiment.batch_poll_s,
        max_requests=experiment.batch_max_requests,
        max_line_attempts=experiment.batch_max_line_attempts,
        log=log,
    )
    agent.prices = agent.prices.scaled(BATCH_DISCOUNT)
    return chat.batch
