"""Rounds: the next request of every live run collected into batches, submitted and waited on."""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from giant_assets.agents.providers.batching.client import (
    BatchClient,
    BatchStatus,
    ListedBatch,
    Results,
    wire_json,
)
from giant_assets.agents.providers.batching.store import ENDED, BatchStore
from giant_assets.agents.providers.errors import ProviderError, RetriesExhausted
from giant_assets.agents.providers.retry import RETRYABLE_STATUS
from giant_assets.runs.records import RunWaiting
from giant_assets.runs.run_identity import current_run

# how far the provider's clock may be from ours: a batch created from an intent is listed back to this
# much before the intent, and (Anthropic) counts as a candidate from then on
CLOCK_SLACK_S = 60.0
# a batch seen ended whose look now shows it running without its results: looked at this many times
# (detach) this far apart at most before its runs stop
CONTRADICTED_LOOKS, CONTRADICTED_PAUSE_S = 3, 5.0
_RUN: contextvars.ContextVar[object | None] = contextvars.ContextVar("batch_run", default=None)


class BatchPending(RunWaiting):
    """The run's next request waits in a submitted batch (detach mode): the run stops, unjournalled."""

    def __init__(self, batch_id: str) -> None:
        super().__init__(f"waiting on batch {batch_id}")
        self.batch_id = batch_id


def custom_id(endpoint: str, body: dict[str, Any], run_key: str | None = None) -> str:
    """The request's name in batches (64 chars: both APIs' limit): a digest of the run that sends it
    (``run_identity``'s key: the runs of one item send byte-identical first requests and stay
    independent samples, each its own line; a replay of the same run finds its answers), its endpoint
    and wire body. Outside a run (no identity): of the endpoint and body alone."""
    blob = wire_json(body, sort_keys=True, separators=(",", ":")).encode()
    run = f"{run_key}\0".encode() if run_key else b""
    return "g" + hashlib.sha256(run + endpoint.encode() + b"\0" + blob).hexdigest()[:63]


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
        lock_wait_s: float = 60.0,
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
        self.lock_wait_s = lock_wait_s  # for the store's lock, held by another process's round
        self._store_lock = asyncio.Lock()
        self._locked = False

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Wrap one run: the round closes once every live run waits for the model (a run's concurrent
        requests, as the patch baseline makes, count it once and all go into the same round)."""
        self.live += 1
        token = _RUN.set(object())
        try:
            await self._lock_store()
            yield
        finally:
            _RUN.reset(token)
            self.live -= 1
            if self.live == 0 and self._locked:
                self.store.unlock()
                self._locked = False
            self._maybe_submit()

    async def _lock_store(self) -> None:
        """One submitter per store: take its lock, then read it again from disk, so what another
        process submitted or stored meanwhile is seen before anything is sent (a split round's batches
        each end and each launch a run of the cell: the later run waits, then finds every request in an
        open or answered batch). Another holder past ``lock_wait_s``: a ProviderError naming it."""
        async with self._store_lock:
            if self._locked:
                return
            waited = 0.0
            while not self.store.try_lock():
                if waited >= self.lock_wait_s:
                    raise ProviderError(
                        f"batch store {self.store.folder} is held by another process submitting rounds "
                        f"(waited {waited:.0f}s): let it finish, then run the cell again"
                    )
                await asyncio.sleep(0.2)
                waited += 0.2
            self._locked = True
            self.store.reload()
            for problem in self.store.problems:
                self.log(f"batch store: {problem}")

    async def request(self, body: dict[str, Any]) -> dict[str, Any]:
        """The reply body to one request: from the store, from an open batch, or from a new round."""
        await self.adopt()
        run = current_run()
        cid = custom_id(self.client.endpoint, body, run.key if run is not None else None)
        while True:
            answer = self.store.answers.get(cid)
            if answer is not None and answer["kind"] == "succeeded":
                return answer["body"]
            if (
                answer is not None
                and answer["kind"] == "errored"
                and 400 <= (answer.get("status") or 0) < 500
                and answer.get("status") not in RETRYABLE_STATUS  # 408/409/425/429: sent again
            ):
                raise ProviderError(
                    f"batch line {cid[:12]} refused: {answer.get('error')}", answer.get("status")
                )
            submitted = self.store.submissions.get(cid, 0)
            open_id = self.store.open_batch(cid)
            if open_id is None and submitted >= self.max_line_attempts:
                raise ProviderError(self._gave_up(cid, answer, submitted))
            if open_id is not None:
                await self._wait(open_id)
                continue
            future = asyncio.get_running_loop().create_future()
            self._waiting.setdefault(cid, (body, []))[1].append(future)
            waiter = _RUN.get()
            self._runs_waiting[waiter] = self._runs_waiting.get(waiter, 0) + 1
            self._maybe_submit()
            try:
                await future
            finally:
                self._runs_waiting[waiter] -= 1
                if not self._runs_waiting[waiter]:
                    del self._runs_waiting[waiter]

    def _gave_up(self, cid: str, answer: dict[str, Any] | None, submitted: int) -> str:
        """Why a line is not sent again: the batches it was in, how each ended, and what to do."""
        kind = answer["kind"] if answer else "lost"
        held = [
            f"{b['batch_id']} ({b.get('provider_status') or b.get('status')})"
            for b in self.store.batches.values()
            if cid in b.get("custom_ids", [])
        ]
        return (
            f"batch line {cid[:12]}: {kind} in each of {submitted} batches ({', '.join(held)}); "
            f"batch_max_line_attempts is {self.max_line_attempts}, so it is not sent again. Last error: "
            f"{(answer or {}).get('error', '')}. Look at those batches at the provider; raise "
            "batch_max_line_attempts and materialize the cell again, or run it without batch: true"
        )

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
        try:
            ended = await asyncio.shield(task)
        except RetriesExhausted as exc:
            if self._watchers.get(batch_id) is task:  # a failed watcher is not kept: the next wait polls
                del self._watchers[batch_id]
            # detach: the batch is paid and open; its runs stop unjournalled, as while it runs, and the
            # next run of the cell looks again (hold mode keeps polling: see _watch)
            self.log(f"batch {batch_id}: looking at it failed past the retry policy ({exc}): runs stop")
            self.pending_batches.add(batch_id)
            raise BatchPending(batch_id) from exc
        except Exception:
            if self._watchers.get(batch_id) is task:
                del self._watchers[batch_id]
            raise
        if not ended:
            self.pending_batches.add(batch_id)
            raise BatchPending(batch_id)

    async def _watch(self, batch_id: str) -> bool:
        """Poll the batch (hold: until it ends; detach: once); store its answers when it has ended.
        Each call goes through the provider retry policy. An ended batch stays ended: the first look
        that shows it ended is kept in the store (``seen_ended``, with where its results are), and its
        results are read from there however a later look shows it; one whose results are shown only
        while a look shows it ended (Gemini's inline answers) and that a look now shows running again
        contradicts itself: named in the log and the store, and looked at again (detach: up to
        ``CONTRADICTED_LOOKS`` times, then its runs stop)."""
        contradicted = 0
        while True:
            try:
                record = self.store.batches[batch_id]
                status = BatchStatus.remembered(record) or await self.client.status(batch_id)
                if status.ended:
                    self.store.remember_end(batch_id, status.seen())
                cids = record.get("custom_ids", [])
                fetched = await self.client.results(batch_id, cids, status) if status.ended else None
            except RetriesExhausted as exc:
                if self.mode == "detach":
                    raise
                self.log(f"batch {batch_id}: {exc}; polling on (hold mode)")
                await asyncio.sleep(self.poll_s)
                continue
            if fetched is not None:
                self._store_results(batch_id, status, fetched)
                return True
            if status.ended:
                contradicted += 1
                self.store.note_contradiction(batch_id, "running, its results not shown")
                self.log(
                    f"batch {batch_id} contradicts itself: seen {status.status} before, now shown running "
                    f"again without its results (look {contradicted}): looked at again"
                )
                if self.mode == "hold" or contradicted < CONTRADICTED_LOOKS:
                    await asyncio.sleep(min(self.poll_s, CONTRADICTED_PAUSE_S))
                    continue
            if self.mode == "detach":
                self.log(f"batch {batch_id} {status.status} {status.counts}: runs stop until it ends")
                return False
            await asyncio.sleep(self.poll_s)

    def _store_results(self, batch_id: str, status: BatchStatus, fetched: Results) -> None:
        """Record an ended batch's answers and its end. A request of the record with no result line
        (expired, a line that could not be read, or not in the batch: an adopted Anthropic batch that
        was another's) counts as expired: it goes into the next round, at the cost of one of its
        max_line_attempts. Result lines of requests not in the record are stored too: a custom_id
        names its request, so they answer it."""
        results = fetched.rows
        for problem in fetched.problems:
            self.log(f"left out: {problem}")
        seen = {r["custom_id"] for r in results}
        lost = [cid for cid in self.store.batches[batch_id].get("custom_ids", []) if cid not in seen]
        results += [{"custom_id": cid, "kind": "expired", "error": "no result line"} for cid in lost]
        for row in results:
            row["batch_id"] = batch_id
        self.store.record_answers(results)
        record = (
            self.store.batches[batch_id]
            | {
                "status": ENDED,
                "provider_status": status.status,
                "ended_at": time.time(),
                "counts": status.counts,
            }
            | ({"reason": status.reason} if status.reason else {})
        )
        self.store.record_batch(record)
        failed = sum(r["kind"] != "succeeded" for r in results)
        why = f" ({status.reason})" if status.reason else ""
        self.log(
            f"batch {batch_id} {status.status}{why}: {len(results) - failed} answered, {failed} "
            f"errored/expired/cancelled (re-sent next round, up to batch_max_line_attempts "
            f"{self.max_line_attempts} times)"
        )

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
        """Submit the round in chunks, each announced by a durable intent before its create. A request
        answered or in an open batch by now is not sent (it loops and finds them). A chunk failing to
        submit fails the runs of that chunk and of the chunks after it only: those of the chunks already
        submitted and recorded wait on their batches."""
        self.rounds += 1
        tag = uuid.uuid4().hex[:16]
        fresh = [
            (cid, body)
            for cid, (body, _) in requests.items()
            if self.store.open_batch(cid) is None
            and (self.store.answers.get(cid) or {}).get("kind") != "succeeded"
        ]
        chunks = self._chunks(fresh) if fresh else []
        ids: list[str] = []
        failed: ProviderError | None = None
        unsent: set[str] = set()
        for n, chunk in enumerate(chunks):
            cids = [cid for cid, _ in chunk]
            if failed is not None:
                unsent.update(cids)
                continue
            try:
                # durable before the provider sees the batch: a process killed before the record of
                # its id leaves this, and the next process adopts the batch instead of paying again
                self.store.record_intent(f"{tag}-{n}", cids)
                batch_id = await self.client.submit(chunk, f"{tag}-{n}")
                self.store.record_batch(
                    {
                        "batch_id": batch_id,
                        "custom_ids": cids,
                        "status": "submitted",
                        "submitted_at": time.time(),
                        "round_tag": f"{tag}-{n}",
                        "requests": len(chunk),
                    }
                )
            except Exception as exc:
                # this chunk's intent stays open: a create whose reply was lost may have been accepted,
                # and the next process looks for it before paying again
                failed = ProviderError(
                    f"batch submission of round {tag} chunk {n + 1}/{len(chunks)} failed: "
                    f"{type(exc).__name__}: {exc}"[:500]
                )
                unsent.update(cids)
                continue
            ids.append(batch_id)
            self.submitted_requests += len(chunk)
        self.log(
            f"round {self.rounds}: {len(fresh) - len(unsent)} request(s) in {len(ids)} batch(es) "
            f"{', '.join(ids)}" + (f"; {len(unsent)} not submitted: {failed}" if failed else "")
        )
        for cid, (_, futures) in requests.items():
            for future in futures:
                if future.done():
                    continue
                if cid in unsent and failed is not None:
                    future.set_exception(failed)
                else:
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
