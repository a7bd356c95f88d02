"""Anthropic's Message Batches API: ``/v1/messages/batches`` and its JSONL results."""

from __future__ import annotations

import json
from typing import Any

from giant_assets.agents.providers.batching.client import BatchClient, BatchStatus, ListedBatch

ANTHROPIC_LIMITS = (100_000, 240 * 2**20)  # requests, bytes per batch (published: 100,000 and 256 MB)


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
