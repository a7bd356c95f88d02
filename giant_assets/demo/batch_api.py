"""A loopback server speaking both providers' batch APIs, for tests and the demo (no network).

OpenAI: ``POST /v1/files`` (multipart, purpose ``batch``), ``GET /v1/files/{id}/content``,
``POST /v1/batches``, ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``, ``GET /v1/batches``
(newest first, ``limit`` and ``after``);
statuses validating -> in_progress -> finalizing -> completed (or expired, cancelling -> cancelled,
failed); answers in an output file, failed lines in an error file, expired lines with
``error.code = batch_expired``. Anthropic: ``POST /v1/messages/batches``, ``GET .../{id}``,
``POST .../{id}/cancel``, ``GET .../{id}/results`` (JSONL of succeeded / errored / canceled /
expired results), ``GET /v1/messages/batches`` (newest first, ``limit``, ``after_id``, ``before_id``),
processing_status in_progress -> canceling -> ended.

Each line is answered, when its batch finishes, by a ``ScriptedModelServer``'s rule through the same
code that answers a synchronous request, so a batch line and a direct call get the same reply. A batch
finishes after ``polls_to_finish`` retrievals (one number, or a list: one per batch); ``next_outcomes``
makes the next batches expire (all lines, or ``expire_half``) or fail validation. ``answered`` counts,
per custom id, how often a line was answered (paid for): a client that resubmits one shows up there.

For a client killed around a batch create: ``create_reply_delay_s`` (one number, or a list: one per
create) holds the reply of a create *after* the batch exists; ``stall_creates`` makes the next creates
hang *without* creating anything (the request never reached the provider), answered 503 after
``stall_s`` or when the server stops.
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from giant_assets.demo.loopback import LoopbackServer
from giant_assets.demo.scripted import ScriptedModelServer

OPENAI_PATHS = {"/v1/responses": "/v1/responses", "/v1/chat/completions": "/v1/chat/completions"}
EXPIRED_MESSAGE = "This request could not be executed before the completion window expired."


@dataclass
class _Batch:
    id: str
    kind: str  # "openai" or "anthropic"
    endpoint: str  # the synchronous path each line is answered as
    lines: list[tuple[str, dict[str, Any]]]
    created_at: float
    input_file_id: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    polls: int = 0
    polls_to_finish: int = 1
    outcome: str = "completed"  # completed | expired | expire_half | failed
    cancelled: bool = False
    status: str = ""
    results: list[dict[str, Any]] | None = None  # per line, once finished
    output_file_id: str | None = None
    error_file_id: str | None = None


class BatchAPIServer(LoopbackServer):
    """Loopback batch APIs on 127.0.0.1 answering lines with ``model``'s rule; a context manager."""

    def __init__(
        self, model: ScriptedModelServer, polls_to_finish: int | list[int] = 2, port: int = 0
    ) -> None:
        self.model = model
        # retrievals until a batch ends: one number for every batch, or one per batch in creation order
        self.polls_to_finish = polls_to_finish
        self.next_outcomes: list[str] = []
        self.answered: Counter[str] = Counter()
        self.batches: dict[str, _Batch] = {}
        self.files: dict[str, bytes] = {}
        self.calls: list[tuple[str, str]] = []  # (method, path) of every HTTP request
        self.create_reply_delay_s: float | list[float] = 0.0  # after the batch exists; list: per create
        self.stall_creates = 0  # the next creates hang and create nothing
        self.stall_s = 30.0
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._serve(ThreadingHTTPServer(("127.0.0.1", port), _handler(self)))

    def stop(self) -> None:
        self._stopping.set()  # a held create reply goes out (to a client that may be gone)
        super().stop()

    # ------------------------------------------------------------ state

    def _stall_create(self) -> bool:
        """A create that never reaches the provider: hang (nothing created), True if it was one."""
        with self._lock:
            if self.stall_creates <= 0:
                return False
            self.stall_creates -= 1
        self._stopping.wait(self.stall_s)
        return True

    def _hold_create_reply(self) -> None:
        delay = self.create_reply_delay_s
        if isinstance(delay, list):
            with self._lock:
                delay = delay.pop(0) if delay else 0.0
        if delay:
            self._stopping.wait(delay)

    def listing(self, kind: str, query: dict[str, str]) -> dict[str, Any]:
        """One page of ``kind``'s batches, newest first, as the provider's list endpoint pages them."""
        with self._lock:
            items = [b for b in reversed(self.batches.values()) if b.kind == kind]
        ids = [b.id for b in items]
        limit = int(query.get("limit") or 20)
        after = query.get("after") or query.get("after_id")
        before = query.get("before_id")
        if after in ids:
            items = items[ids.index(after) + 1 :]
        if before in ids:
            items = items[: ids.index(before)]
            page = items[-limit:]
        else:
            page = items[:limit]
        to_wire = self.openai_object if kind == "openai" else self.anthropic_object
        return {
            "object": "list",
            "data": [to_wire(b) for b in page],
            "has_more": len(items) > limit,
            "first_id": page[0].id if page else None,
            "last_id": page[-1].id if page else None,
        }

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):06d}"

    def _create(self, kind: str, endpoint: str, lines: list[tuple[str, dict]], **kw: Any) -> _Batch:
        with self._lock:
            batch = _Batch(
                self._new_id("batch" if kind == "openai" else "msgbatch"),
                kind,
                endpoint,
                lines,
                time.time(),
                **kw,
            )
            if self.next_outcomes:
                batch.outcome = self.next_outcomes.pop(0)
            polls = self.polls_to_finish
            batch.polls_to_finish = polls if isinstance(polls, int) else (polls.pop(0) if polls else 1)
            self.batches[batch.id] = batch
        return batch

    def _advance(self, batch: _Batch) -> None:
        """One retrieval: the batch moves through its statuses and finishes after ``polls_to_finish``."""
        with self._lock:
            if batch.results is not None:
                return
            batch.polls += 1
            if batch.outcome == "failed":
                batch.status = "failed"
                batch.results = []
                return
            if not batch.cancelled and batch.polls < batch.polls_to_finish:
                steps = ["validating", "in_progress", "finalizing"]
                batch.status = steps[min(batch.polls - 1, 2)] if batch.kind == "openai" else "in_progress"
                return
        self._finish(batch)

    def _finish(self, batch: _Batch) -> None:
        results = []
        half = len(batch.lines) // 2
        for index, (custom_id, body) in enumerate(batch.lines):
            if batch.cancelled:
                results.append({"custom_id": custom_id, "kind": "canceled"})
            elif batch.outcome == "expired" or (batch.outcome == "expire_half" and index >= half):
                results.append({"custom_id": custom_id, "kind": "expired"})
            else:
                status, payload = self.model.answer(batch.endpoint, json.dumps(body).encode())
                with self._lock:
                    self.answered[custom_id] += 1
                results.append(
                    {
                        "custom_id": custom_id,
                        "kind": "answered",
                        "status": status,
                        "body": json.loads(payload),
                    }
                )
        with self._lock:
            batch.results = results
            if batch.kind == "anthropic":
                batch.status = "ended"
            else:
                batch.status = (
                    "cancelled"
                    if batch.cancelled
                    else "expired"
                    if batch.outcome == "expired"
                    else "completed"
                )
                self._openai_files(batch)

    def _openai_files(self, batch: _Batch) -> None:
        out, err = [], []
        for n, r in enumerate(batch.results or []):
            line: dict[str, Any] = {"id": f"batch_req_{batch.id}_{n}", "custom_id": r["custom_id"]}
            if r["kind"] == "answered":
                line |= {
                    "response": {"status_code": r["status"], "request_id": f"req_{n}", "body": r["body"]},
                    "error": None,
                }
                (out if r["status"] < 400 else err).append(line)
            else:
                code = "batch_expired" if r["kind"] == "expired" else "batch_cancelled"
                err.append(line | {"response": None, "error": {"code": code, "message": EXPIRED_MESSAGE}})
        if out:
            batch.output_file_id = self._new_id("file")
            self.files[batch.output_file_id] = "".join(json.dumps(x) + "\n" for x in out).encode()
        if err:
            batch.error_file_id = self._new_id("file")
            self.files[batch.error_file_id] = "".join(json.dumps(x) + "\n" for x in err).encode()

    # ------------------------------------------------------------ wire objects

    def openai_object(self, b: _Batch) -> dict[str, Any]:
        done = [r for r in b.results or [] if r["kind"] == "answered" and r["status"] < 400]
        return {
            "id": b.id,
            "object": "batch",
            "endpoint": b.endpoint,
            "input_file_id": b.input_file_id,
            "completion_window": "24h",
            "status": b.status or "validating",
            "created_at": int(b.created_at),
            "output_file_id": b.output_file_id,
            "error_file_id": b.error_file_id,
            "metadata": b.metadata,
            "request_counts": {
                "total": len(b.lines),
                "completed": len(done),
                "failed": len(b.results or []) - len(done),
            },
        }

    def anthropic_object(self, b: _Batch) -> dict[str, Any]:
        kinds = Counter(_anthropic_type(r) for r in b.results or [])
        ended = b.results is not None
        return {
            "id": b.id,
            "type": "message_batch",
            "processing_status": "ended" if ended else "canceling" if b.cancelled else "in_progress",
            "request_counts": {
                "processing": 0 if ended else len(b.lines),
                "succeeded": kinds["succeeded"],
                "errored": kinds["errored"],
                "canceled": kinds["canceled"],
                "expired": kinds["expired"],
            },
            "created_at": _iso(b.created_at),
            "expires_at": _iso(b.created_at + 86400),
            "ended_at": _iso(time.time()) if ended else None,
            "archived_at": None,
            "cancel_initiated_at": _iso(time.time()) if b.cancelled else None,
            "results_url": f"{self.base_url}/v1/messages/batches/{b.id}/results" if ended else None,
        }

    def anthropic_results(self, b: _Batch) -> bytes:
        lines = []
        for r in b.results or []:
            kind = _anthropic_type(r)
            result: dict[str, Any] = {"type": kind}
            if kind == "succeeded":
                result["message"] = r["body"]
            elif kind == "errored":
                result["error"] = (
                    r["body"]
                    if r["body"].get("type") == "error"
                    else {"type": "error", "error": {"type": "api_error", "message": json.dumps(r["body"])}}
                )
            lines.append(json.dumps({"custom_id": r["custom_id"], "result": result}) + "\n")
        return "".join(lines).encode()


def _anthropic_type(r: dict[str, Any]) -> str:
    if r["kind"] != "answered":
        return r["kind"]
    return "succeeded" if r["status"] < 400 else "errored"


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


def _multipart(content_type: str, body: bytes) -> dict[str, bytes]:
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body
    )
    return {
        part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
        for part in message.iter_parts()
    }


def _handler(server: BatchAPIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _reply(self, status: int, payload: Any, raw: bool = False) -> None:
            data = payload if raw else json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/octet-stream" if raw else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # a client killed while its reply was held
                self.close_connection = True

        def _not_found(self) -> None:
            self._reply(404, {"error": {"type": "not_found_error", "message": f"no route {self.path}"}})

        def _batch(self, batch_id: str, kind: str) -> _Batch | None:
            batch = server.batches.get(batch_id)
            return batch if batch is not None and batch.kind == kind else None

        def do_GET(self) -> None:  # noqa: N802
            path, _, qs = self.path.partition("?")
            query = {k: v[-1] for k, v in urllib.parse.parse_qs(qs).items()}
            server.calls.append(("GET", path))
            parts = path.strip("/").split("/")
            if parts[:2] == ["v1", "files"] and len(parts) == 4 and parts[3] == "content":
                data = server.files.get(parts[2])
                return self._reply(200, data, raw=True) if data is not None else self._not_found()
            if parts[:2] == ["v1", "batches"] and len(parts) == 3:
                batch = self._batch(parts[2], "openai")
                if batch is None:
                    return self._not_found()
                server._advance(batch)
                return self._reply(200, server.openai_object(batch))
            if parts[:2] == ["v1", "batches"] and len(parts) == 2:
                return self._reply(200, server.listing("openai", query))
            if parts == ["v1", "messages", "batches"]:
                page = server.listing("anthropic", query)
                return self._reply(200, {k: v for k, v in page.items() if k != "object"})
            if parts[:3] == ["v1", "messages", "batches"] and len(parts) in (4, 5):
                batch = self._batch(parts[3], "anthropic")
                if batch is None:
                    return self._not_found()
                if len(parts) == 5 and parts[4] == "results":
                    if batch.results is None:
                        return self._reply(
                            400,
                            {
                                "type": "error",
                                "error": {"type": "invalid_request_error", "message": "batch not ended"},
                            },
                        )
                    return self._reply(200, server.anthropic_results(batch), raw=True)
                server._advance(batch)
                return self._reply(200, server.anthropic_object(batch))
            return self._not_found()

        def do_POST(self) -> None:  # noqa: N802
            path = self.path.split("?")[0]
            server.calls.append(("POST", path))
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            parts = path.strip("/").split("/")
            if path == "/v1/files":
                fields = _multipart(self.headers.get("Content-Type", ""), body)
                if fields.get("purpose") != b"batch" or "file" not in fields:
                    return self._reply(400, {"error": {"message": "purpose must be batch, with a file"}})
                file_id = server._new_id("file")
                server.files[file_id] = fields["file"]
                return self._reply(
                    200,
                    {
                        "id": file_id,
                        "object": "file",
                        "bytes": len(fields["file"]),
                        "created_at": int(time.time()),
                        "filename": "batch.jsonl",
                        "purpose": "batch",
                        "status": "processed",
                    },
                )
            if path == "/v1/batches":
                req = json.loads(body)
                lines = []
                for raw in server.files.get(req.get("input_file_id"), b"").splitlines():
                    line = json.loads(raw)
                    if line.get("url") != req.get("endpoint") or line.get("method") != "POST":
                        return self._reply(
                            400,
                            {
                                "error": {
                                    "message": f"line url {line.get('url')!r} "
                                    "does not match the batch endpoint"
                                }
                            },
                        )
                    lines.append((line["custom_id"], line["body"]))
                if req.get("endpoint") not in OPENAI_PATHS or not lines:
                    return self._reply(400, {"error": {"message": "bad endpoint or empty input file"}})
                if server._stall_create():
                    return self._reply(503, {"error": {"message": "stalled create: no batch"}})
                batch = server._create(
                    "openai",
                    req["endpoint"],
                    lines,
                    input_file_id=req["input_file_id"],
                    metadata=req.get("metadata") or {},
                )
                server._hold_create_reply()
                return self._reply(200, server.openai_object(batch))
            if parts[:2] == ["v1", "batches"] and len(parts) == 4 and parts[3] == "cancel":
                batch = self._batch(parts[2], "openai")
                if batch is None:
                    return self._not_found()
                batch.cancelled = True
                batch.status = "cancelling" if batch.results is None else batch.status
                return self._reply(200, server.openai_object(batch))
            if path == "/v1/messages/batches":
                req = json.loads(body)
                lines = [(r["custom_id"], r["params"]) for r in req.get("requests") or []]
                if not lines:
                    return self._reply(
                        400,
                        {
                            "type": "error",
                            "error": {"type": "invalid_request_error", "message": "no requests"},
                        },
                    )
                if server._stall_create():
                    return self._reply(
                        503, {"type": "error", "error": {"type": "overloaded_error", "message": "stalled"}}
                    )
                batch = server._create("anthropic", "/v1/messages", lines)
                server._hold_create_reply()
                return self._reply(200, server.anthropic_object(batch))
            if parts[:3] == ["v1", "messages", "batches"] and len(parts) == 5 and parts[4] == "cancel":
                batch = self._batch(parts[3], "anthropic")
                if batch is None:
                    return self._not_found()
                batch.cancelled = True
                return self._reply(200, server.anthropic_object(batch))
            return self._not_found()

    return Handler
