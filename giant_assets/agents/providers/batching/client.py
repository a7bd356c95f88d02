"""What every provider's batch client offers the round scheduler."""

from __future__ import annotations

import abc
import json
from dataclasses import dataclass
from typing import Any


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
