"""Gemini's Batch API on the loopback batch server (``batch_api.BatchAPIServer``), as its reference
describes it (https://ai.google.dev/api/batch-api, guide https://ai.google.dev/gemini-api/docs/batch-api):

- ``POST /v1beta/models/{model}:batchGenerateContent`` with ``{"batch": {"displayName", "inputConfig":
  {"requests": {"requests": [InlinedRequest]}}}}``, each ``{"request": GenerateContentRequest,
  "metadata": {...}}``; answered with the batch's long-running ``Operation``;
- ``GET /v1beta/batches/{id}``: the ``Operation``, its ``metadata`` the ``GenerateContentBatch``
  (``state`` BATCH_STATE_PENDING -> RUNNING -> SUCCEEDED, or FAILED / CANCELLED / EXPIRED, with
  ``batchStats``) and, once succeeded, ``output.inlinedResponses.inlinedResponses`` in request order,
  each ``{"metadata", "response": GenerateContentResponse}`` or ``{"metadata", "error": Status}``;
- ``POST /v1beta/batches/{id}:cancel``, ``GET /v1beta/batches`` (``pageSize``, ``pageToken``).

Every route wants the key in ``x-goog-api-key`` (or ``?key=``); errors are Google's ``{"error": {"code",
"message", "status"}}``. A line's error carries the gRPC code of the HTTP status the scripted model
answered. Injected: ``drop_metadata`` (the next batches' responses come without their ``metadata``, as
some users report the service doing) besides the server's shared faults.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from giant_assets.demo.batch_api import BatchAPIServer, _Batch

TYPE = "type.googleapis.com/google.ai.generativelanguage.v1main."
STATUS_WORDS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE",
                504: "DEADLINE_EXCEEDED"}  # fmt: skip
GRPC_CODES = {400: 3, 401: 16, 403: 7, 404: 5, 409: 10, 429: 8, 499: 1, 500: 13, 503: 14, 504: 4}


def error(status: int, message: str) -> dict[str, Any]:
    """Google's error body for an HTTP status."""
    return {"error": {"code": status, "message": message, "status": STATUS_WORDS.get(status, "UNKNOWN")}}


def state(server: BatchAPIServer, b: _Batch) -> str:
    """The batch's ``BatchState`` as a retrieval shows it now."""
    if b.results is None or not server.shown_ended(b):
        return "BATCH_STATE_RUNNING" if b.polls else "BATCH_STATE_PENDING"
    if b.status == "failed":
        return "BATCH_STATE_FAILED"
    if b.cancelled:
        return "BATCH_STATE_CANCELLED"
    return "BATCH_STATE_EXPIRED" if b.outcome == "expired" else "BATCH_STATE_SUCCEEDED"


def operation(server: BatchAPIServer, b: _Batch) -> dict[str, Any]:
    """The batch as its ``Operation``."""
    now = _iso(time.time())
    shown = state(server, b)
    done = shown not in ("BATCH_STATE_PENDING", "BATCH_STATE_RUNNING")
    answered = [r for r in b.results or [] if r["kind"] == "answered"] if done else []
    ok = sum(r["status"] < 400 for r in answered)
    batch: dict[str, Any] = {
        "@type": TYPE + "GenerateContentBatch", "name": b.id, "model": b.metadata["model"],
        "displayName": b.metadata["displayName"], "createTime": _iso(b.created_at), "updateTime": now,
        "state": shown,
        "batchStats": {"requestCount": str(len(b.lines)), "successfulRequestCount": str(ok),
                       "failedRequestCount": str(len(answered) - ok),
                       "pendingRequestCount": str(0 if done else len(b.lines))},
    }  # fmt: skip
    op: dict[str, Any] = {"name": b.id, "metadata": batch, "done": done}
    if done:
        batch["endTime"] = now
    if shown == "BATCH_STATE_SUCCEEDED":
        output = {"inlinedResponses": {"inlinedResponses": [_response(b, r) for r in b.results or []]}}
        batch["output"] = output
        op["response"] = {"@type": TYPE + "GenerateContentBatchOutput"} | output
    elif shown == "BATCH_STATE_FAILED":
        op["error"] = {"code": 8, "message": server.failure_reason[1]}
    return op


def _response(b: _Batch, r: dict[str, Any]) -> dict[str, Any]:
    line: dict[str, Any] = {} if b.no_metadata else {"metadata": {"key": r["custom_id"]}}
    if r["kind"] != "answered":
        return line | {"error": {"code": 4, "message": "the batch ended before this request ran"}}
    if r["status"] < 400:
        return line | {"response": r["body"]}
    message = (r["body"].get("error") or {}).get("message") if isinstance(r["body"], dict) else None
    code = GRPC_CODES.get(r["status"], 2)
    return line | {"error": {"code": code, "message": message or json.dumps(r["body"])}}


def handle(
    server: BatchAPIServer, handler: Any, method: str, parts: list[str], query: dict, body: bytes
) -> None:
    """Serve one request under ``/v1beta`` through the HTTP handler (its headers and ``_reply``)."""
    reply = handler._reply
    if not (handler.headers.get("x-goog-api-key") or query.get("key")):
        return reply(403, error(403, "Method doesn't allow unregistered callers (no API key)"))
    tail = parts[1:]
    create = ":batchGenerateContent"
    if method == "POST" and len(tail) == 2 and tail[0] == "models" and tail[1].endswith(create):
        return _create(server, reply, tail[1].removesuffix(create), body)
    if method == "POST" and len(tail) == 2 and tail[0] == "batches" and tail[1].endswith(":cancel"):
        batch = server.batches.get("batches/" + tail[1].removesuffix(":cancel"))
        if batch is None or batch.kind != "gemini":
            return reply(404, error(404, f"no batch {tail[1]}"))
        batch.cancelled = True  # ends on its next retrieval
        return reply(200, {})
    if method == "GET" and tail == ["batches"]:
        return reply(200, _listing(server, query))
    if method == "GET" and len(tail) == 2 and tail[0] == "batches":
        batch = server.batches.get("batches/" + tail[1])
        if batch is None or batch.kind != "gemini":
            return reply(404, error(404, f"no batch batches/{tail[1]}"))
        server._advance(batch)
        return reply(200, operation(server, batch))
    return reply(404, error(404, f"no route /{'/'.join(parts)}"))


def _create(server: BatchAPIServer, reply: Any, model: str, body: bytes) -> None:
    batch = (json.loads(body or b"{}").get("batch") or {}) if body else {}
    inline = ((batch.get("inputConfig") or {}).get("requests") or {}).get("requests") or []
    lines = [((r.get("metadata") or {}).get("key", ""), r.get("request") or {}) for r in inline]
    if not lines or not batch.get("displayName"):
        return reply(400, error(400, "a batch needs a displayName and inline requests"))
    if len(body) > 20 * 2**20:
        return reply(400, error(400, f"inline requests total {len(body)} bytes: over 20 MB, use a file"))
    if server._stall_create():
        return reply(503, error(503, "stalled create: no batch"))
    if server.take("refuse_creates"):
        return reply(429, error(429, "injected 429: too many batches"))
    if server.failed_create():
        return reply(500, error(500, "injected 500 on create"))
    endpoint = f"/v1beta/models/{model}:generateContent"
    created = server._create(
        "gemini", endpoint, lines, metadata={"model": f"models/{model}", "displayName": batch["displayName"]}
    )
    created.no_metadata = server.take("drop_metadata")
    server._hold_create_reply()
    return reply(200, operation(server, created))


def _listing(server: BatchAPIServer, query: dict[str, str]) -> dict[str, Any]:
    """One page of the Gemini batches, newest first."""
    items = [b for b in reversed(list(server.batches.values())) if b.kind == "gemini"]
    size, start = int(query.get("pageSize") or 50), int(query.get("pageToken") or 0)
    page = items[start : start + size]
    out: dict[str, Any] = {"operations": [operation(server, b) for b in page]}
    if start + size < len(items):
        out["nextPageToken"] = str(start + size)
    return out


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}Z"
