r"""Gemini's Batch API (https://ai.google.dev/gemini-api/docs/batch-api, reference
https://ai.google.dev/api/batch-api) through the ``google-genai`` SDK's async client:
``client.aio.batches.create`` (``POST /v1beta/models/{model}:batchGenerateContent``), ``.get``
(``GET /v1beta/batches/{id}``), ``.cancel`` (``POST /v1beta/batches/{id}:cancel``) and ``.list``
(``GET /v1beta/batches``).

Each request is the same contents and config the synchronous ``GeminiChatModel`` sends. As the guide
advises, a batch whose requests stay under 20 MB goes *inline* (``InlinedRequest``\ s, the custom id
as ``metadata.key``; answered in ``InlinedResponse``\ s in request order, matched by their keys; one
without its ``metadata`` by its position only where as many came back as were sent, in order: else
left out, its request sent again); a larger one goes as an uploaded JSONL *input file*
(``client.aio.files.upload``, the resumable upload protocol; each line ``{"key", "request"}``, the
request in the REST form the SDK itself sends inline), answered in a responses file
(``client.aio.files.download``) of ``{"key", "response" | "error"}`` lines, read one by one. An error
is a ``google.rpc.Status``: its gRPC code is mapped to the HTTP status it stands for. The batch's
``display_name`` carries the round tag, so a batch whose create reply was lost is found by it after a
restart. Batch tokens cost half the synchronous price (docs: "50% of the standard cost").

A batch is read (``GET batches/{id}``, ``GET batches``) as the REST JSON it is, through the SDK's own
API client (its auth, base URL, timeout, transport and error classes), not through the typed
``batches.get``: the SDK's ``JobError.details`` takes strings where a line's ``google.rpc.Status``
carries typed objects, and one such line error would make the whole batch unreadable.
"""

from __future__ import annotations

import io
import json
import urllib.parse
from collections.abc import Sequence
from datetime import datetime
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
# a batch's batchStats, as its counts
STATS = {"requestCount": "requests", "successfulRequestCount": "succeeded", "failedRequestCount": "failed",
         "pendingRequestCount": "pending"}  # fmt: skip
TAG_PREFIX = "giant-round-"  # display_name = prefix + round tag
TERMINAL = frozenset({"BATCH_STATE_SUCCEEDED", "BATCH_STATE_FAILED", "BATCH_STATE_CANCELLED",
                      "BATCH_STATE_EXPIRED"})  # fmt: skip
# the HTTP status each gRPC code of a line's error stands for (google.rpc.Code, as mapped by
# https://cloud.google.com/apis/design/errors#error_codes): a 4xx is refused for good, not sent again
GRPC_STATUS = {1: 499, 2: 500, 3: 400, 4: 504, 5: 404, 6: 409, 7: 403, 8: 429, 9: 400, 10: 409,
               11: 400, 12: 501, 13: 500, 14: 503, 15: 500, 16: 401}  # fmt: skip


class GeminiBatches(BatchClient):
    """Batches (inline, or an input file) of ``models/{model}:generateContent`` requests; ``endpoint``
    is that path. The input file's lines and the responses file's are converted by the SDK's own
    (private) converters of inline requests and of responses, so both forms carry the same bytes: a
    renamed converter fails the tests that compare file lines with synchronous requests."""

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

    async def _rest(self, where: str, path: str) -> dict[str, Any]:
        """``GET {path}`` (under ``v1beta/``) as JSON, through the SDK's API client."""

        async def get() -> dict[str, Any]:
            reply = await self.client._api_client.async_request("get", path, {})
            data = json.loads(reply.body or "{}")
            if not isinstance(data, dict):
                raise json.JSONDecodeError("not a JSON object", str(reply.body)[:80], 0)
            return data

        return await self.call(where, get)

    async def _batch(self, batch_id: str) -> dict[str, Any]:
        """The batch (its ``GenerateContentBatch``: the operation's metadata) and the operation's
        ``error``, if any."""
        op = await self._rest(f"gemini {batch_id}", f"batches/{batch_id.removeprefix('batches/')}")
        return (op.get("metadata") or {}) | ({"error": op["error"]} if op.get("error") else {})

    async def status(self, batch_id: str) -> BatchStatus:
        batch = await self._batch(batch_id)
        state = _state(batch)
        stats = {STATS[k]: int(v) for k, v in (batch.get("batchStats") or {}).items() if k in STATS}
        error = batch.get("error") or {}
        reason = f"{error.get('code')}: {error.get('message')}" if error else ""
        ended = state in TERMINAL
        output = batch.get("output") or {}
        name = output.get("responsesFile")
        handle = {"responses_file": name} if ended and isinstance(name, str) and name else {}
        return BatchStatus(ended, state, stats, reason[:500], handle, view=batch if ended else None)

    async def _read(self, batch_id: str, custom_ids: Sequence[str], ended: BatchStatus) -> Results | None:
        """The responses file the ended look named; else the inline responses of the ended look (a
        remembered look keeps none: those of a look now, None while it shows the batch running again);
        none in a batch that did not succeed (its lines count as expired)."""
        out = Results()
        name = ended.handle.get("responses_file")
        if name:
            data = await self.call(
                f"gemini {batch_id} {name}", lambda: self.client.aio.files.download(file=name)
            )
            text = data.decode("utf-8", errors="replace")
            read_lines(text, f"batch {batch_id} file {name}", _file_row, out, id_field="key")
            return out
        if ended.status != "BATCH_STATE_SUCCEEDED":
            return out
        batch = ended.view if ended.view is not None else await self._batch(batch_id)
        if _state(batch) not in TERMINAL:
            return None
        output = batch.get("output") or {}
        responses = (output.get("inlinedResponses") or {}).get("inlinedResponses") or []
        for n, key, line in _matched(responses, list(custom_ids), batch_id, out):
            try:
                out.rows.append(_file_row(line | {"key": key}))
            except (KeyError, TypeError, AttributeError, ValueError) as exc:
                out.problems.append(
                    f"batch {batch_id} response {n + 1} ({key[:16]}): unexpected shape ({exc!r})"
                )
        return out

    async def cancel(self, batch_id: str) -> None:
        await self.call(f"gemini {batch_id} cancel", lambda: self.client.aio.batches.cancel(name=batch_id))

    async def listed(self, since: float) -> list[ListedBatch]:
        out: list[ListedBatch] = []
        token = ""
        while True:  # the listing's order is not documented: every page is read
            query = urllib.parse.urlencode({"pageSize": 100} | ({"pageToken": token} if token else {}))
            page = await self._rest("gemini batches list", f"batches?{query}")
            for op in page.get("operations") or []:
                batch = op.get("metadata") or {}
                created = _seconds(batch.get("createTime"))
                name = str(batch.get("displayName") or "")
                if created >= since:
                    tag = name.removeprefix(TAG_PREFIX) if name.startswith(TAG_PREFIX) else None
                    requests = int((batch.get("batchStats") or {}).get("requestCount") or 0)
                    out.append(ListedBatch(str(op.get("name")), created, requests, tag))
            token = page.get("nextPageToken") or ""
            if not token:
                return sorted(out, key=lambda b: -b.created_at)

    def line_bytes(self, cid: str, body: dict[str, Any]) -> int:
        return len(wire_json(body)) + len(cid) + 40


def _matched(
    responses: list[Any], custom_ids: list[str], batch_id: str, out: Results
) -> list[tuple[int, str, dict[str, Any]]]:
    """Each inline response with the custom id it answers: its ``metadata.key``. A response without
    one is matched by its position only where the positions can be trusted: as many responses as
    requests, and every keyed response at its own request's place; otherwise (one short, reordered)
    it is named in ``out.problems`` and its request, answered by nothing, goes into the next round."""
    keyed = [((r.get("metadata") or {}) if isinstance(r, dict) else {}).get("key") for r in responses]
    in_order = len(responses) == len(custom_ids) and all(
        k is None or k == custom_ids[n] for n, k in enumerate(keyed)
    )
    found = []
    for n, (key, line) in enumerate(zip(keyed, responses, strict=True)):
        where = f"batch {batch_id} response {n + 1}"
        if not isinstance(line, dict):
            out.problems.append(f"{where}: not an object")
        elif isinstance(key, str) and key:
            found.append((n, key, line))
        elif in_order:
            found.append((n, custom_ids[n], line))
        else:
            out.problems.append(
                f"{where}: no metadata key, and its position names no request ({len(responses)} "
                f"responses to {len(custom_ids)} requests, or in another order): not matched"
            )
    return found


def _state(batch: dict[str, Any]) -> str:
    """The batch's state as the REST API names it (``BATCH_STATE_...``; the SDK's ``JOB_STATE_...``
    read as the same)."""
    return str(batch.get("state") or "").replace("JOB_STATE_", "BATCH_STATE_")


def _seconds(stamp: Any) -> float:
    """An RFC 3339 timestamp as unix seconds (0 when absent or unreadable)."""
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


def _row(key: str, line: types.InlinedResponse) -> dict[str, Any]:
    """One inline response as a result row: the response as JSON data (``GeminiChatModel._revive``
    reads it back), or the error with the HTTP status of its gRPC code."""
    if line.error is not None:
        error = json.dumps(line.error.model_dump(mode="json", exclude_none=True))[:500]
        row: dict[str, Any] = {"custom_id": key, "kind": "errored", "error": error}
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
    """One response (a responses-file line, or an inline response given its key: ``{"key", "response" |
    "error"}``, REST JSON) as a result row, through the SDK's own conversion of a response."""
    response = line.get("response")
    raw = sdk_batches._GenerateContentResponse_from_mldev(response) if isinstance(response, dict) else None
    parsed = types.GenerateContentResponse._from_response(response=raw, kwargs={}) if raw else None
    status = line.get("error")
    # a google.rpc.Status: its details (typed objects) are left out, the SDK's JobError takes strings
    error = types.JobError(code=status.get("code"), message=status.get("message")) if status else None
    return _row(line["key"], types.InlinedResponse(response=parsed, error=error))
