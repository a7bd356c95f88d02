r"""Gemini's Batch API (https://ai.google.dev/gemini-api/docs/batch-api, reference
https://ai.google.dev/api/batch-api) through the ``google-genai`` SDK's async client:
``client.aio.batches.create`` (``POST /v1beta/models/{model}:batchGenerateContent``), ``.get``
(``GET /v1beta/batches/{id}``), ``.cancel`` (``POST /v1beta/batches/{id}:cancel``) and ``.list``
(``GET /v1beta/batches``).

Each request is the same contents and config the synchronous ``GeminiChatModel`` sends. As the guide
advises, a batch whose requests stay under 20 MB goes *inline* (``InlinedRequest``\ s, the custom id
as ``metadata.key``; answered in ``InlinedResponse``\ s in request order, a response without its
``metadata`` named by its position); a larger one goes as an uploaded JSONL *input file*
(``client.aio.files.upload``, the resumable upload protocol; each line ``{"key", "request"}``, the
request in the REST form the SDK itself sends inline), answered in a responses file
(``client.aio.files.download``) of ``{"key", "response" | "error"}`` lines, read one by one. An error
is a ``google.rpc.Status``: its gRPC code is mapped to the HTTP status it stands for. The batch's
``display_name`` carries the round tag, so a batch whose create reply was lost is found by it after a
restart. Batch tokens cost half the synchronous price (docs: "50% of the standard cost").
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from typing import Any

from google.genai import _common, types
from google.genai import batches as sdk_batches

from giant_assets.agents.providers.batching.client import (
    BatchClient,
    BatchStatus,
    ListedBatch,
    Results,
    read_lines,
    wire_json,
)

# requests (our own cap: none is published), bytes per input file (published: 2 GB; ours is lower as
# the file is built in memory beside the round's requests: a few more batches instead of GBs of RAM)
GEMINI_LIMITS = (50_000, 500 * 2**20)
# a batch up to this size goes inline (published: "keep the total request size under 20MB"; the
# create's envelope and keys take the rest)
INLINE_BYTES = 19 * 2**20
TAG_PREFIX = "giant-round-"  # display_name = prefix + round tag
TERMINAL = frozenset({"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"})
# the HTTP status each gRPC code of a line's error stands for (google.rpc.Code, as mapped by
# https://cloud.google.com/apis/design/errors#error_codes): a 4xx is refused for good, not sent again
GRPC_STATUS = {1: 499, 2: 500, 3: 400, 4: 504, 5: 404, 6: 409, 7: 403, 8: 429, 9: 400, 10: 409,
               11: 400, 12: 501, 13: 500, 14: 503, 15: 500, 16: 401}  # fmt: skip


class GeminiBatches(BatchClient):
    """Inline batches of ``models/{model}:generateContent`` requests; ``endpoint`` is that path."""

    limits = GEMINI_LIMITS
    tagged = True  # the round tag travels in display_name

    def __init__(self, client: Any, endpoint: str, *, model: str, **kw: Any) -> None:
        super().__init__(client, endpoint, **kw)
        self.model = model

    async def submit(self, lines: list[tuple[str, dict[str, Any]]], tag: str) -> str:
        requests = [
            types.InlinedRequest(contents=body["contents"], config=body["config"], metadata={"key": cid})
            for cid, body in lines
        ]
        src: Any = requests
        if sum(self.line_bytes(cid, body) for cid, body in lines) > INLINE_BYTES:
            src = await self._upload(requests, tag)
        batch = await self.call(
            f"gemini models/{self.model}:batchGenerateContent",
            lambda: self.client.aio.batches.create(
                model=self.model, src=src, config={"display_name": TAG_PREFIX + tag}
            ),
            create=True,
        )
        return str(batch.name)

    async def _upload(self, requests: list[types.InlinedRequest], tag: str) -> str:
        """The requests as a JSONL input file, uploaded; its name (``files/...``). Each line's request
        is what the SDK sends for the same ``InlinedRequest`` inline (its own REST conversion)."""
        out = []
        for request in requests:
            wire = sdk_batches._InlinedRequest_to_mldev(self.client._api_client, request)
            wire = _common.encode_unserializable_types(_common.convert_to_dict(wire))
            out.append(json.dumps({"key": wire["metadata"]["key"], "request": wire["request"]}) + "\n")
        jsonl = "".join(out).encode()
        # an upload sent again costs nothing (an unused file); a create only where it was refused
        uploaded = await self.call(
            "gemini files upload",
            lambda: self.client.aio.files.upload(
                file=io.BytesIO(jsonl), config={"mime_type": "jsonl", "display_name": TAG_PREFIX + tag}
            ),
        )
        return str(uploaded.name)

    async def _get(self, batch_id: str) -> types.BatchJob:
        return await self.call(f"gemini {batch_id}", lambda: self.client.aio.batches.get(name=batch_id))

    async def status(self, batch_id: str) -> BatchStatus:
        batch = await self._get(batch_id)
        state = _state(batch)  # the SDK reads neither batchStats nor a failed batch's error: not shown
        return BatchStatus(state in TERMINAL, state, {})

    async def results(self, batch_id: str, custom_ids: Sequence[str] = ()) -> Results | None:
        batch = await self._get(batch_id)
        if _state(batch) not in TERMINAL:
            return None  # seen ended before, not now: looked at again, its lines are not lost
        out = Results()
        if batch.dest is not None and batch.dest.file_name:
            name = batch.dest.file_name
            data = await self.call(
                f"gemini {batch_id} {name}", lambda: self.client.aio.files.download(file=name)
            )
            text = data.decode("utf-8", errors="replace")
            read_lines(text, f"batch {batch_id} file {name}", _file_row, out, id_field="key")
            return out
        responses = (batch.dest.inlined_responses if batch.dest else None) or []
        for n, line in enumerate(responses):
            key = (line.metadata or {}).get("key") or (custom_ids[n] if n < len(custom_ids) else None)
            if not key:
                out.problems.append(f"batch {batch_id} response {n + 1}: no metadata key, no request there")
                continue
            out.rows.append(_row(key, line))
        return out  # a failed, cancelled or expired batch has no responses: its lines count as expired

    async def cancel(self, batch_id: str) -> None:
        await self.call(f"gemini {batch_id} cancel", lambda: self.client.aio.batches.cancel(name=batch_id))

    async def listed(self, since: float) -> list[ListedBatch]:
        async def listing() -> list[ListedBatch]:
            out = []
            async for batch in await self.client.aio.batches.list(config={"page_size": 100}):
                created = batch.create_time.timestamp() if batch.create_time else 0.0
                if created < since:
                    continue  # the listing's order is not documented: every page is read
                name = batch.display_name or ""
                tag = name.removeprefix(TAG_PREFIX) if name.startswith(TAG_PREFIX) else None
                out.append(ListedBatch(str(batch.name), created, 0, tag))
            return sorted(out, key=lambda b: -b.created_at)

        return await self.call("gemini batches list", listing)

    def line_bytes(self, cid: str, body: dict[str, Any]) -> int:
        return len(wire_json(body)) + len(cid) + 40


def _state(batch: types.BatchJob) -> str:
    return str(getattr(batch.state, "value", batch.state) or "")


def _row(key: str, line: types.InlinedResponse) -> dict[str, Any]:
    """One inline response as a result row: the response as JSON data (``GeminiChatModel._revive``
    reads it back), or the error with the HTTP status of its gRPC code."""
    if line.error is not None:
        row: dict[str, Any] = {"custom_id": key, "kind": "errored", "error": json.dumps(line.error.model_dump(
            mode="json", exclude_none=True))[:500]}  # fmt: skip
        if line.error.code == 1:
            row["kind"] = "canceled"
        elif line.error.code in GRPC_STATUS:
            row["status"] = GRPC_STATUS[line.error.code]
        return row
    if line.response is None:
        return {"custom_id": key, "kind": "errored", "error": "neither a response nor an error"}
    body = line.response.model_dump(mode="json", exclude_none=True)
    return {"custom_id": key, "kind": "succeeded", "body": body}


def _file_row(line: dict[str, Any]) -> dict[str, Any]:
    """One responses-file line (``{"key", "response" | "error"}``, REST JSON) as a result row, through
    the SDK's own conversion of a response."""
    response = line.get("response")
    raw = sdk_batches._GenerateContentResponse_from_mldev(response) if isinstance(response, dict) else None
    parsed = types.GenerateContentResponse._from_response(response=raw, kwargs={}) if raw else None
    error = types.JobError._from_response(response=line["error"], kwargs={}) if line.get("error") else None
    return _row(line["key"], types.InlinedResponse(response=parsed, error=error))
