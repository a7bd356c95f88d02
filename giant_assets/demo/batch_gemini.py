"""Gemini's Batch API on the loopback batch server (``batch_api.BatchAPIServer``; the batches and faults
it shares with the other providers' routes are ``batch_emulator_base.BatchEmulator``'s), as its
reference describes it (https://ai.google.dev/api/batch-api, guide
https://ai.google.dev/gemini-api/docs/batch-api):

- ``POST /v1beta/models/{model}:batchGenerateContent`` with ``{"batch": {"displayName", "inputConfig":
  {"requests": {"requests": [InlinedRequest]}}}}``, each ``{"request": GenerateContentRequest,
  "metadata": {...}}``; answered with the batch's long-running ``Operation``;
- ``GET /v1beta/batches/{id}``: the ``Operation``, its ``metadata`` the ``GenerateContentBatch``
  (``state`` BATCH_STATE_PENDING -> RUNNING -> SUCCEEDED, or FAILED / CANCELLED / EXPIRED, with
  ``batchStats``) and, once succeeded, ``output.inlinedResponses.inlinedResponses`` in request order,
  each ``{"metadata", "response": GenerateContentResponse}`` or ``{"metadata", "error": Status}``;
- ``POST /v1beta/batches/{id}:cancel``, ``GET /v1beta/batches`` (``pageSize``, ``pageToken``);
- an input file instead of inline requests (``inputConfig.fileName``), uploaded by the resumable
  upload protocol (``POST /upload/v1beta/files`` with ``X-Goog-Upload-Command: start`` answers the
  upload URL in ``X-Goog-Upload-URL``; chunks go there with ``upload`` / ``upload, finalize`` and
  ``X-Goog-Upload-Offset``, answered ``X-Goog-Upload-Status: active`` / ``final``), JSONL lines
  ``{"key", "request"}``; such a batch answers in a responses file (``output.responsesFile``) of
  ``{"key", "response" | "error"}`` lines, read at ``GET /download/v1beta/files/{id}:download?alt=media``
  (the ``media.download`` reference's path; the SDK asks ``/v1beta/files/{id}:download?alt=media``).

Every route wants the key in ``x-goog-api-key`` (or ``?key=``); errors are Google's ``{"error": {"code",
"message", "status"}}``. A line's error carries the gRPC code of the HTTP status the scripted model
answered. Injected: ``drop_metadata`` (the next batches' responses come without their ``metadata``, as
some users report the service doing; a batch's ``no_metadata = "odd"``: its 1st, 3rd, ... responses
only), ``short_responses`` (the next batches' inline responses lack the first one), ``reorder_responses``
(... come in reverse order) besides the server's shared faults (``bad_lines``: in a
responses file); ``page_cap`` caps a listing's page size (a listing of a few batches spans pages).
"""

from __future__ import annotations

import json
import time
from typing import Any

from giant_assets.demo.batch_emulator_base import BatchEmulator, EmulatedBatch

ROOTS = ("v1beta", "upload", "download")  # the first path segment of Gemini's routes
TYPE = "type.googleapis.com/google.ai.generativelanguage.v1main."
STATUS_WORDS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE",
                504: "DEADLINE_EXCEEDED"}  # fmt: skip
GRPC_CODES = {400: 3, 401: 16, 403: 7, 404: 5, 409: 10, 429: 8, 499: 1, 500: 13, 503: 14, 504: 4}


def error(status: int, message: str) -> dict[str, Any]:
    """Google's error body for an HTTP status."""
    return {"error": {"code": status, "message": message, "status": STATUS_WORDS.get(status, "UNKNOWN")}}


def state(server: BatchEmulator, b: EmulatedBatch) -> str:
    """The batch's ``BatchState`` as a retrieval shows it now."""
    if b.results is None or not server.shown_ended(b):
        return "BATCH_STATE_RUNNING" if b.polls else "BATCH_STATE_PENDING"
    if b.status == "failed":
        return "BATCH_STATE_FAILED"
    if b.cancelled:
        return "BATCH_STATE_CANCELLED"
    return "BATCH_STATE_EXPIRED" if b.outcome == "expired" else "BATCH_STATE_SUCCEEDED"


def operation(server: BatchEmulator, b: EmulatedBatch) -> dict[str, Any]:
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
        lines = [_response(b, r, n) for n, r in enumerate(b.results or [])]
        if b.input_file_id:  # answered in a responses file, each line keyed
            if b.output_file_id is None:
                b.output_file_id = f"files/batch-{b.id.split('/')[-1]}-responses"
                keyed = [{"key": r["custom_id"]} | {k: v for k, v in line.items() if k != "metadata"}
                         for r, line in zip(b.results or [], lines, strict=True)]  # fmt: skip
                text = [json.dumps(x) for x in keyed]
                if b.bad_lines:  # a torn line, a blank one, one without its key
                    text[1:1] = ['{"key": "torn', "", json.dumps({"response": {}})]
                server.files[b.output_file_id] = "".join(x + "\n" for x in text).encode()
            output: dict[str, Any] = {"responsesFile": b.output_file_id}
        else:
            if b.reordered:  # the service's order, not the requests'
                lines.reverse()
            output = {"inlinedResponses": {"inlinedResponses": lines[1:] if b.short else lines}}
        batch["output"] = output
        op["response"] = {"@type": TYPE + "GenerateContentBatchOutput"} | output
    elif shown == "BATCH_STATE_FAILED":
        op["error"] = {"code": 8, "message": server.failure_reason[1]}
    return op


def _response(b: EmulatedBatch, r: dict[str, Any], n: int) -> dict[str, Any]:
    keyless = b.no_metadata is True or (b.no_metadata == "odd" and n % 2 == 0)
    line: dict[str, Any] = {} if keyless else {"metadata": {"key": r["custom_id"]}}
    if r["kind"] != "answered":
        return line | {"error": {"code": 4, "message": "the batch ended before this request ran"}}
    if r["status"] < 400:
        return line | {"response": r["body"]}
    message = (r["body"].get("error") or {}).get("message") if isinstance(r["body"], dict) else None
    code = GRPC_CODES.get(r["status"], 2)
    info = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "domain": "googleapis.com",
            "reason": STATUS_WORDS.get(r["status"], "UNKNOWN")}  # fmt: skip
    return line | {"error": {"code": code, "message": message or json.dumps(r["body"]), "details": [info]}}


def handle(
    server: BatchEmulator, handler: Any, method: str, parts: list[str], query: dict, body: bytes
) -> None:
    """Serve one request under ``/v1beta`` through the HTTP handler (its headers and ``_reply``)."""
    reply = handler._reply
    if parts[0] == "upload" and query.get("upload_id"):  # the upload URL carries the session
        return _upload_chunk(server, handler, query["upload_id"], body)
    if not (handler.headers.get("x-goog-api-key") or query.get("key")):
        return reply(403, error(403, "Method doesn't allow unregistered callers (no API key)"))
    if method == "POST" and parts == ["upload", "v1beta", "files"]:
        return _upload_start(server, handler, body)
    media = parts[1:] if parts[0] == "download" else parts  # the reference's path, and the SDK's
    if (
        method == "GET"
        and media[:2] == ["v1beta", "files"]
        and len(media) == 3
        and media[2].endswith(":download")
    ):
        data = server.files.get("files/" + media[2].removesuffix(":download"))
        if data is None or query.get("alt") != "media":
            return reply(404, error(404, f"no file {media[2]} (or not alt=media)"))
        return reply(200, data, raw=True)
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


def _upload_start(server: BatchEmulator, handler: Any, body: bytes) -> None:
    """``X-Goog-Upload-Command: start``: a new upload session, its URL in ``X-Goog-Upload-URL``."""
    if (
        handler.headers.get("X-Goog-Upload-Protocol") != "resumable"
        or handler.headers.get("X-Goog-Upload-Command") != "start"
    ):
        return handler._reply(400, error(400, "resumable upload protocol: start the session first"))
    session = server._new_id("upload")
    meta = (json.loads(body or b"{}").get("file") or {}) if body else {}
    server.uploads[session] = (meta, bytearray())
    url = f"{server.base_url}/upload/v1beta/files?upload_id={session}&upload_protocol=resumable"
    _send(handler, 200, b"", {"X-Goog-Upload-URL": url, "X-Goog-Upload-Status": "active"})


def _upload_chunk(server: BatchEmulator, handler: Any, session: str, body: bytes) -> None:
    """A chunk at ``X-Goog-Upload-Offset``; ``finalize`` makes the file (``{"file": File}``)."""
    meta, data = server.uploads.get(session, ({}, bytearray()))
    command = handler.headers.get("X-Goog-Upload-Command", "")
    if session not in server.uploads or int(handler.headers.get("X-Goog-Upload-Offset", -1)) != len(data):
        return _send(handler, 400, json.dumps(error(400, "unknown session or wrong offset")).encode(), {})
    data.extend(body)
    if "finalize" not in command:
        return _send(handler, 200, b"", {"X-Goog-Upload-Status": "active"})
    name = "files/" + server._new_id("gfile")
    server.files[name] = bytes(data)
    del server.uploads[session]
    file = {"name": name, "displayName": meta.get("displayName", ""), "mimeType": meta.get("mimeType", ""),
            "sizeBytes": str(len(data)), "createTime": _iso(time.time()), "state": "ACTIVE",
            "source": "UPLOADED"}  # fmt: skip
    _send(handler, 200, json.dumps({"file": file}).encode(), {"X-Goog-Upload-Status": "final"})


def _send(handler: Any, status: int, payload: bytes, headers: dict[str, str]) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(payload)))
    for k, v in headers.items():
        handler.send_header(k, v)
    handler.end_headers()
    handler.wfile.write(payload)


def _create(server: BatchEmulator, reply: Any, model: str, body: bytes) -> None:
    batch = (json.loads(body or b"{}").get("batch") or {}) if body else {}
    config = batch.get("inputConfig") or {}
    inline = (config.get("requests") or {}).get("requests") or []
    lines = [((r.get("metadata") or {}).get("key", ""), r.get("request") or {}) for r in inline]
    file_name = config.get("fileName") or ""
    if file_name:
        if file_name not in server.files:
            return reply(404, error(404, f"no file {file_name}"))
        rows = [json.loads(x) for x in server.files[file_name].splitlines() if x.strip()]
        lines = [(r.get("key", ""), r.get("request") or {}) for r in rows]
    if not lines or not batch.get("displayName"):
        return reply(400, error(400, "a batch needs a displayName and inline requests or an input file"))
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
        "gemini", endpoint, lines, metadata={"model": f"models/{model}", "displayName": batch["displayName"]},
        input_file_id=file_name,
    )  # fmt: skip
    created.no_metadata = server.take("drop_metadata")
    created.short, created.reordered = server.take("short_responses"), server.take("reorder_responses")
    server._hold_create_reply()
    return reply(200, operation(server, created))


def _listing(server: BatchEmulator, query: dict[str, str]) -> dict[str, Any]:
    """One page of the Gemini batches, newest first."""
    items = [b for b in reversed(list(server.batches.values())) if b.kind == "gemini"]
    size = min(int(query.get("pageSize") or 50), server.page_cap)
    start = int(query.get("pageToken") or 0)
    page = items[start : start + size]
    out: dict[str, Any] = {"operations": [operation(server, b) for b in page]}
    if start + size < len(items):
        out["nextPageToken"] = str(start + size)
    return out


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}Z"
