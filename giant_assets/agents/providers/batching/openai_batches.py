"""OpenAI's batch API: an uploaded JSONL file, ``/v1/batches``, output and error files."""

from __future__ import annotations

import io
import json
from typing import Any

from giant_assets.agents.providers.batching.client import BatchClient, BatchStatus, ListedBatch

OPENAI_LIMITS = (50_000, 190 * 2**20)  # requests, bytes per input file (published: 50,000 and 200 MB)


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
