"""What every provider's batch client offers the round scheduler, and what they share: every call to a
batch endpoint goes through the provider retry policy (``retry.py``), and result lines are read one by
one, a bad line named (batch, file, line number) and left out rather than failing the batch."""

from __future__ import annotations

import abc
import json
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from giant_assets.agents.providers.errors import ProviderError
from giant_assets.agents.providers.retry import Failure, RetryPolicy, with_retries
from giant_assets.runs.replies import json_data

T = TypeVar("T")
Classify = Callable[[BaseException], Failure | ProviderError | None]
# a create refused with one of these did not create a batch: sent again. Any other failure (a 500, a
# timeout, a dropped connection) may have created it: not sent again in this process; the round's intent
# stays open and the next process looks the batch up (``BatchRound.adopt``) before paying again
CREATE_RETRYABLE = frozenset({429, 503, 529})


@dataclass(frozen=True)
class BatchStatus:
    ended: bool
    status: str  # the provider's own status word
    counts: dict[str, int]
    reason: str = ""  # why a batch failed as a whole (OpenAI ``errors``), for the log
    # an ended batch: where its results are, as the look that saw it end named them (OpenAI's file
    # ids, Anthropic's results URL, Gemini's responses file): kept in the store, so the results are
    # read from there even if a later look shows the batch running again without them
    handle: dict[str, Any] = field(default_factory=dict)
    view: Any = field(default=None, compare=False, repr=False)  # the look itself (Gemini: inline answers)

    def seen(self) -> dict[str, Any]:
        """What the store keeps of a look that saw the batch end (``seen_ended``)."""
        return {"status": self.status, "counts": self.counts, "reason": self.reason, "handle": self.handle}

    @classmethod
    def remembered(cls, record: dict[str, Any]) -> BatchStatus | None:
        """The ended look a batch record remembers (``seen_ended``), or None."""
        seen = record.get("seen_ended")
        if not isinstance(seen, dict):
            return None
        return cls(True, str(seen.get("status", "")), dict(seen.get("counts") or {}),
                   str(seen.get("reason") or ""), dict(seen.get("handle") or {}))  # fmt: skip


@dataclass(frozen=True)
class ListedBatch:
    """A batch as the provider lists it: enough to tell whether it is an intent's."""

    id: str
    created_at: float  # unix seconds, the provider's clock
    requests: int  # its number of requests
    tag: str | None  # the round tag it carries (OpenAI metadata); None where batches carry none


@dataclass
class Results:
    """An ended batch's result lines: ``{custom_id, kind: succeeded|errored|expired|canceled, body |
    error [, status]}`` each, and the lines that could not be read (named, left out)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _no_retry(exc: BaseException) -> Failure | ProviderError | None:
    return None  # a client without a policy: every exception goes up as it is


class BatchClient(abc.ABC):
    """One provider's batch API through its official SDK client (``max_retries=0``), each call retried
    by ``retry`` with the model's own error classification."""

    limits: tuple[int, int]
    tagged: bool  # a batch carries the round tag it was submitted with (found by it after a restart)

    def __init__(
        self,
        client: Any,
        endpoint: str,
        *,
        retry: RetryPolicy | None = None,
        classify: Classify | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.client = client
        self.endpoint = endpoint  # the synchronous path each line stands for, e.g. /v1/responses
        self.retry = retry or RetryPolicy()
        self.classify = classify or _no_retry
        self.rng = rng or random.Random()

    async def call(self, where: str, fn: Callable[[], Awaitable[T]], *, create: bool = False) -> T:
        """``fn()`` under the retry policy; ``create``: retried only where the provider said it refused."""
        classify = self._create_classify(where) if create else self.classify
        value, *_ = await with_retries(
            fn, classify, where=where, policy=self.retry, limiter=None, rng=self.rng
        )
        return value

    def _create_classify(self, where: str) -> Classify:
        def classify(exc: BaseException) -> Failure | ProviderError | None:
            failure = self.classify(exc)
            if isinstance(failure, Failure) and failure.status not in CREATE_RETRYABLE:
                return ProviderError(
                    f"{where}: {failure.message} (status {failure.status}): not sent again, the batch may "
                    "exist; the next run of the cell looks it up before paying again",
                    failure.status,
                )
            return failure

        return classify

    @abc.abstractmethod
    async def submit(self, lines: list[tuple[str, dict[str, Any]]], tag: str) -> str:
        """Create a batch of (custom_id, body) lines; returns its id."""

    @abc.abstractmethod
    async def status(self, batch_id: str) -> BatchStatus: ...

    async def results(
        self, batch_id: str, custom_ids: Sequence[str] = (), ended: BatchStatus | None = None
    ) -> Results | None:
        """The ended batch's result lines, read where ``ended`` (a look that saw it end, now or
        remembered; default: a look now) says they are; None when it has not ended, or its results
        cannot be read now (Gemini's inline answers, shown only while a look shows it ended): its lines
        are not lost, the batch is looked at again. ``custom_ids``: the batch's requests in the order
        they were submitted (Gemini answers inline requests in that order)."""
        ended = ended or await self.status(batch_id)
        return await self._read(batch_id, custom_ids, ended) if ended.ended else None

    @abc.abstractmethod
    async def _read(self, batch_id: str, custom_ids: Sequence[str], ended: BatchStatus) -> Results | None:
        """The result lines of a batch ``ended`` saw end, from what it names."""

    @abc.abstractmethod
    async def cancel(self, batch_id: str) -> None: ...

    @abc.abstractmethod
    async def listed(self, since: float) -> list[ListedBatch]:
        """The account's batches created at or after ``since`` (unix seconds), newest first."""

    def line_bytes(self, cid: str, body: dict[str, Any]) -> int:
        return len(json.dumps({"custom_id": cid, "body": body})) + 80


def wire_json(body: Any, **kw: Any) -> str:
    """A request body as JSON; its SDK objects (Gemini's contents and config are pydantic models) as
    the JSON data they stand for, as the reply store's request digests have them."""
    return json.dumps(body, default=json_data, **kw)


def read_lines(
    text: str,
    where: str,
    parse: Callable[[dict[str, Any]], dict[str, Any]],
    out: Results,
    id_field: str = "custom_id",
) -> None:
    """Each JSONL line of ``text`` through ``parse`` into ``out.rows``; a blank line is skipped, a line
    that is not JSON, has no ``id_field`` (Gemini's files: ``key``) or not the expected shape goes into
    ``out.problems`` as ``<where> line <n>: <why>``, and the other lines are still read."""
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError as exc:
            out.problems.append(f"{where} line {n}: not JSON ({exc})")
            continue
        if not isinstance(line, dict) or not isinstance(line.get(id_field), str) or not line[id_field]:
            out.problems.append(f"{where} line {n}: no {id_field}")
            continue
        try:
            out.rows.append(parse(line))
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            out.problems.append(f"{where} line {n} ({line[id_field][:16]}): unexpected shape ({exc!r})")
