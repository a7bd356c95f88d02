"""OpenAI's batch API: an uploaded JSONL file, ``/v1/batches``, output and error files."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from giant_assets.agents.providers.batching.client import (
    BatchClient,
    BatchStatus,
    ListedBatch,
    Results,
    read_lines,
)

OPENAI_LIMITS = (50_000, 190 * 2**20)  # requests, bytes per input file (published: 50,000 and 200 MB)


class OpenAIBatches(BatchClient):
    """``/v1/files`` (purpose ``batch``), ``/v1/batches`` over ``/v1/responses`` or chat completions."""

    limits = OPENAI_LIMITS
    tagged = True
    TERMINAL = frozenset({"completed", "expired", "cancelled", "failed"})
    name = "openai"  # how calls are named in errors and logs
    routes = "/v1"  # the files and batches routes' prefix, for the same

    def _upload_name(self, tag: str) -> str:
        return "giant-batch.jsonl"

    def _create_options(self, tag: str) -> dict[str, Any]:
        return {"metadata": {"giant_round": tag}}

    async def submit(self, lines: list[tuple[str, dict[str, Any]]], tag: str) -> str:
        jsonl = "".join(
            json.dumps({"custom_id": cid, "method": "POST", "url": self.endpoint, "body": body}) + "\n"
            for cid, body in lines
        ).encode()
        # an upload sent again costs nothing (an unused file); a create only where it was refused
        upload = await self.call(
            f"{self.name} {self.routes}/files",
            lambda: self.client.files.create(
                file=(self._upload_name(tag), io.BytesIO(jsonl)), purpose="batch"
            ),
        )
        batch = await self.call(
            f"{self.name} {self.routes}/batches create",
            lambda: self.client.batches.create(
                input_file_id=upload.id,
                endpoint=self.endpoint,
                completion_window="24h",
                **self._create_options(tag),
            ),
            create=True,
        )
        return batch.id

    async def _retrieve(self, batch_id: str) -> Any:
        batch = await self.call(
            f"{self.name} batch {batch_id}", lambda: self.client.batches.retrieve(batch_id)
        )
        batch.status = str(batch.status or "").lower()  # Azure's REST reference shows "Validating"
        return batch

    async def status(self, batch_id: str) -> BatchStatus:
        batch = await self._retrieve(batch_id)
        counts = batch.request_counts.model_dump() if batch.request_counts else {}
        errors = getattr(batch, "errors", None)
        reason = "; ".join(
            f"{e.code or 'error'}: {e.message or ''}" + (f" (line {e.line})" if e.line else "")
            for e in (errors.data or [] if errors else [])
        )
        ended = batch.status in self.TERMINAL
        files = {"output_file_id": batch.output_file_id, "error_file_id": batch.error_file_id}
        handle = {k: v for k, v in files.items() if ended and isinstance(v, str) and v}
        return BatchStatus(ended, batch.status, counts, reason[:500], handle)

    async def _read(self, batch_id: str, custom_ids: Sequence[str], ended: BatchStatus) -> Results | None:
        """The output and error files the ended look named (an ended batch without them: no lines)."""
        out = Results()
        for file_id in (ended.handle.get("output_file_id"), ended.handle.get("error_file_id")):
            if not file_id:
                continue
            content = await self.call(
                f"{self.name} file {file_id}", lambda f=file_id: self.client.files.content(f)
            )
            read_lines(content.text, f"batch {batch_id} file {file_id}", _row, out)
        return out

    async def cancel(self, batch_id: str) -> None:
        await self.call(f"{self.name} batch {batch_id} cancel", lambda: self.client.batches.cancel(batch_id))

    async def _tag(self, batch: Any) -> str | None:
        """The round tag ``batch`` was created with."""
        return (batch.metadata or {}).get("giant_round")

    async def listed(self, since: float) -> list[ListedBatch]:
        async def listing() -> list[ListedBatch]:
            out = []
            async for batch in self.client.batches.list(limit=100):  # newest first, page by page
                created = _unix(batch.created_at)
                if created < since:
                    break
                counts = batch.request_counts
                total = (counts.total or 0) if counts else 0
                out.append(ListedBatch(batch.id, created, total, await self._tag(batch)))
            return out

        return await self.call(f"{self.name} {self.routes}/batches list", listing)


def _unix(value: Any) -> float:
    """A batch's ``created_at``: unix seconds, or (Azure's REST reference shows both) an ISO 8601 time."""
    if isinstance(value, str) and not value.replace(".", "").isdigit():
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return float(value)


def _row(line: dict[str, Any]) -> dict[str, Any]:
    """One output or error file line as a result row."""
    cid, response, error = line["custom_id"], line.get("response"), line.get("error")
    if response and response.get("status_code", 500) < 400:
        body = response["body"]
        if not isinstance(body, dict):
            raise TypeError(f"response body is {type(body).__name__}")
        return {"custom_id": cid, "kind": "succeeded", "body": body}
    if response:
        error_text = json.dumps(response.get("body"))[:500]
        return {
            "custom_id": cid,
            "kind": "errored",
            "status": response.get("status_code"),
            "error": error_text,
        }
    code = str((error or {}).get("code") or "")
    kind = "expired" if code == "batch_expired" else "canceled" if "cancel" in code else "errored"
    return {"custom_id": cid, "kind": kind, "error": str(error)[:500]}
