"""Anthropic's Message Batches API: ``/v1/messages/batches`` and its JSONL results."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from giant_assets.agents.providers.batching.client import (
    BatchClient,
    BatchStatus,
    ListedBatch,
    Results,
    read_lines,
)

ANTHROPIC_LIMITS = (100_000, 240 * 2**20)  # requests, bytes per batch (published: 100,000 and 256 MB)
# the HTTP status each error type of Anthropic's API stands for (docs: "Errors"): an errored result line
# carries the type only; a 4xx is refused for good, not sent again
ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


class AnthropicBatches(BatchClient):
    """``/v1/messages/batches`` and its results."""

    limits = ANTHROPIC_LIMITS
    tagged = False  # message batches carry no metadata: found by creation time and request count

    async def submit(self, lines: list[tuple[str, dict[str, Any]]], tag: str) -> str:
        requests = [{"custom_id": cid, "params": body} for cid, body in lines]
        batch = await self.call(
            "anthropic /v1/messages/batches create",
            lambda: self.client.messages.batches.create(requests=requests),
            create=True,
        )
        return batch.id

    async def _retrieve(self, batch_id: str) -> Any:
        return await self.call(
            f"anthropic batch {batch_id}", lambda: self.client.messages.batches.retrieve(batch_id)
        )

    async def status(self, batch_id: str) -> BatchStatus:
        batch = await self._retrieve(batch_id)
        counts = batch.request_counts.model_dump() if batch.request_counts else {}
        ended = batch.processing_status == "ended"
        handle = {"results_url": batch.results_url} if ended and batch.results_url else {}
        return BatchStatus(ended, batch.processing_status, counts, handle=handle)

    async def _read(self, batch_id: str, custom_ids: Sequence[str], ended: BatchStatus) -> Results | None:
        """The results file at the URL the ended look named (none named: a look now names it, or the
        batch is looked at again)."""
        url = ended.handle.get("results_url") or (await self.status(batch_id)).handle.get("results_url")
        if not url:
            return None
        # the raw JSONL, read line by line here (the SDK's decoder fails the whole file on one bad line)
        text = await self.call(
            f"anthropic batch {batch_id} results",
            lambda: self.client.get(url, cast_to=str, options={"headers": {"Accept": "application/binary"}}),
        )
        out = Results()
        read_lines(text, f"batch {batch_id} file {url}", _row, out)
        return out

    async def cancel(self, batch_id: str) -> None:
        await self.call(
            f"anthropic batch {batch_id} cancel", lambda: self.client.messages.batches.cancel(batch_id)
        )

    async def listed(self, since: float) -> list[ListedBatch]:
        async def listing() -> list[ListedBatch]:
            out = []
            async for batch in self.client.messages.batches.list(limit=100):  # newest first
                created = batch.created_at.timestamp()
                if created < since:
                    break
                c = batch.request_counts
                total = c.processing + c.succeeded + c.errored + c.canceled + c.expired
                out.append(ListedBatch(batch.id, created, total, None))
            return out

        return await self.call("anthropic /v1/messages/batches list", listing)


def _row(line: dict[str, Any]) -> dict[str, Any]:
    """One results line as a result row; an errored line keeps the HTTP status of its error type."""
    result = line["result"]
    kind = result["type"]
    row: dict[str, Any] = {"custom_id": line["custom_id"], "kind": kind}
    if kind == "succeeded":
        if not isinstance(result["message"], dict):
            raise TypeError("message is not an object")
        row["body"] = result["message"]
    elif kind == "errored":
        error = result.get("error") or {}
        inner = error.get("error", error) if isinstance(error, dict) else {}
        row["error"] = json.dumps(error)[:500]
        status = ERROR_STATUS.get(inner.get("type", "") if isinstance(inner, dict) else "")
        if status is not None:
            row["status"] = status
    elif kind not in ("expired", "canceled"):
        raise ValueError(f"unknown result type {kind!r}")
    return row
