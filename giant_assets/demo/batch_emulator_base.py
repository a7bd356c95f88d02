"""What the loopback batch emulators share (``batch_api.BatchAPIServer`` speaks OpenAI's, Azure's and
Anthropic's routes, ``batch_gemini`` Gemini's): the emulated batches, their lifecycle (created, looked
at ``polls_to_finish`` times, answered line by line through a ``ScriptedModelServer``'s rule, ended) and
the injected faults each provider's routes draw on. No HTTP here: the routes are in those modules."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from giant_assets.demo.loopback import LoopbackServer
from giant_assets.demo.scripted import ScriptedModelServer


@dataclass
class EmulatedBatch:
    id: str
    kind: str  # "openai", "azure", "anthropic" or "gemini"
    endpoint: str  # the synchronous path each line is answered as
    lines: list[tuple[str, dict[str, Any]]]
    created_at: float
    input_file_id: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    polls: int = 0
    polls_to_finish: int = 1
    outcome: str = "completed"  # completed | expired | expire_half | failed
    cancelled: bool = False
    flip: bool = False  # shown in_progress once, on the retrieval after the one that ended it
    alternate: bool = False  # shown in_progress, without result files, on every other retrieval after
    views_after_end: int = 0
    bad_lines: bool = False
    conflicting: bool = False
    failure: tuple[str, str] | None = None  # why validation failed it (code, message); else the server's
    no_metadata: bool | str = False  # gemini: responses without their metadata ("odd": every other one)
    short: bool = False  # gemini: its inline responses lack the first one
    reordered: bool = False  # gemini: its inline responses in reverse order
    status: str = ""
    results: list[dict[str, Any]] | None = None  # per line, once finished
    finishing: bool = False  # its lines are being answered: a look meanwhile shows it still running
    output_file_id: str | None = None
    error_file_id: str | None = None


class BatchEmulator(LoopbackServer):
    """The state and lifecycle of emulated batches, over a loopback server a subclass serves."""

    def __init__(self, model: ScriptedModelServer, polls_to_finish: int | list[int] = 2) -> None:
        self.model = model
        # retrievals until a batch ends: one number for every batch, or one per batch in creation order
        self.polls_to_finish = polls_to_finish
        self.next_outcomes: list[str] = []
        self.answered: Counter[str] = Counter()
        self.batches: dict[str, EmulatedBatch] = {}
        self.files: dict[str, bytes] = {}
        self.file_names: dict[str, str] = {}
        # Azure: the key its routes demand in ``api-key``, or the Entra ID token in ``Authorization``
        self.azure_key: str | None = None
        self.azure_token: str | None = None
        self.deployments: set[str] | None = None  # the resource's batch deployments (None: any name)
        self.azure_auth: list[str] = []  # "api-key" or "bearer": how each Azure request was authorized
        self.calls: list[tuple[str, str]] = []  # (method, path) of every HTTP request
        self.create_reply_delay_s: float | list[float] = 0.0  # after the batch exists; list: per create
        self.stall_creates = 0  # the next creates hang and create nothing
        self.stall_s = 30.0
        self.fail_polls = 0
        self.fail_downloads = 0
        self.refuse_creates = 0
        self.fail_listings = 0
        self.flip_after_end = 0
        self.flip_every_other = 0
        self.bad_lines = 0
        self.conflicting = 0
        self.failure_reason = ("token_limit_exceeded", "Enqueued token limit reached for gpt-5.")
        self.created_lines: Counter[str] = Counter()
        self.drop_metadata = 0  # gemini: the next batches' responses come without their metadata
        self.short_responses = 0  # gemini: the next batches' inline responses lack their first one
        self.reorder_responses = 0  # gemini: the next batches' inline responses come in reverse order
        self.uploads: dict[str, tuple[dict[str, Any], bytearray]] = {}  # gemini: open upload sessions
        self.page_cap = 100  # gemini: the most batches a listing's page holds
        self.fail_create_at: set[int] = set()  # these creates (1 = the first) answer 500, create nothing
        self.creates = 0
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def stop(self) -> None:
        self._stopping.set()  # a held create reply goes out (to a client that may be gone)
        super().stop()

    # ------------------------------------------------------------ state

    def _stall_create(self) -> bool:
        """A create that never reaches the provider: hang (nothing created), True if it was one."""
        with self._lock:
            if self.stall_creates <= 0:
                return False
            self.stall_creates -= 1
        self._stopping.wait(self.stall_s)
        return True

    def take(self, fault: str) -> bool:
        """One occurrence of the injected ``fault`` (a counter attribute), True if one was left."""
        with self._lock:
            left = getattr(self, fault)
            if left <= 0:
                return False
            setattr(self, fault, left - 1)
            return True

    def failed_create(self) -> bool:
        """Count a create; True when this one is to answer 500 without creating anything."""
        with self._lock:
            self.creates += 1
            return self.creates in self.fail_create_at

    def shown_ended(self, batch: EmulatedBatch) -> bool:
        """Whether a retrieval shows the batch ended now (a flipping batch: not on its second look)."""
        odd = batch.views_after_end % 2 == 1
        return batch.results is not None and not ((batch.flip and batch.views_after_end == 1)
                                                  or (batch.alternate and odd))  # fmt: skip

    def _hold_create_reply(self) -> None:
        delay = self.create_reply_delay_s
        if isinstance(delay, list):
            with self._lock:
                delay = delay.pop(0) if delay else 0.0
        if delay:
            self._stopping.wait(delay)

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):06d}"

    def _create(self, kind: str, endpoint: str, lines: list[tuple[str, dict]], **kw: Any) -> EmulatedBatch:
        with self._lock:
            prefix = {"anthropic": "msgbatch", "gemini": "batches/gbatch"}.get(kind, "batch")
            batch = EmulatedBatch(
                self._new_id(prefix),
                kind,
                endpoint,
                lines,
                time.time(),
                **kw,
            )
            if self.next_outcomes:
                batch.outcome = self.next_outcomes.pop(0)
            self.created_lines.update(cid for cid, _ in lines)
        batch.flip, batch.alternate, batch.bad_lines, batch.conflicting = (
            self.take("flip_after_end"),
            self.take("flip_every_other"),
            self.take("bad_lines"),
            self.take("conflicting"),
        )
        with self._lock:
            polls = self.polls_to_finish
            batch.polls_to_finish = polls if isinstance(polls, int) else (polls.pop(0) if polls else 1)
            self.batches[batch.id] = batch
        return batch

    def _advance(self, batch: EmulatedBatch) -> None:
        """One retrieval: the batch moves through its statuses and finishes after ``polls_to_finish``."""
        with self._lock:
            if batch.results is not None:
                batch.views_after_end += 1
                return
            if batch.finishing:  # another look is answering its lines: each line is answered once
                return
            batch.polls += 1
            if batch.outcome == "failed" or batch.failure:
                batch.status = "failed"
                batch.results = []
                return
            if not batch.cancelled and batch.polls < batch.polls_to_finish:
                steps = ["validating", "in_progress", "finalizing"]
                batch.status = steps[min(batch.polls - 1, 2)] if batch.kind != "anthropic" else "in_progress"
                return
            batch.finishing = True
            batch.status = "in_progress" if batch.kind == "anthropic" else "finalizing"
        self._finish(batch)

    def _finish(self, batch: EmulatedBatch) -> None:
        results = []
        half = len(batch.lines) // 2
        for index, (custom_id, body) in enumerate(batch.lines):
            if batch.cancelled:
                results.append({"custom_id": custom_id, "kind": "canceled"})
            elif batch.outcome == "expired" or (batch.outcome == "expire_half" and index >= half):
                results.append({"custom_id": custom_id, "kind": "expired"})
            else:
                status, payload = self.model.answer(batch.endpoint, json.dumps(body).encode())
                with self._lock:
                    self.answered[custom_id] += 1
                results.append(
                    {
                        "custom_id": custom_id,
                        "kind": "answered",
                        "status": status,
                        "body": json.loads(payload),
                    }
                )
        with self._lock:
            batch.results = results
            if batch.kind == "anthropic":
                batch.status = "ended"
            elif batch.kind == "gemini":
                batch.status = "ended"  # its state is read off the batch (``batch_gemini.state``)
            else:
                batch.status = (
                    "cancelled"
                    if batch.cancelled
                    else "expired"
                    if batch.outcome == "expired"
                    else "completed"
                )
                self._result_files(batch)

    def _result_files(self, batch: EmulatedBatch) -> None:
        """Write an OpenAI-wire batch's output and error files, as it ends (the subclass's wire)."""
