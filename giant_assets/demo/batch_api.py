"""A loopback server speaking OpenAI's, Anthropic's and Gemini's batch APIs, for tests and the demo
(no network). Gemini's routes (``/v1beta/...``) are in ``batch_gemini.py``.

OpenAI: ``POST /v1/files`` (multipart, purpose ``batch``), ``GET /v1/files/{id}/content``,
``POST /v1/batches``, ``GET /v1/batches/{id}``, ``POST /v1/batches/{id}/cancel``, ``GET /v1/batches``
(newest first, ``limit`` and ``after``);
statuses validating -> in_progress -> finalizing -> completed (or expired, cancelling -> cancelled,
failed); answers in an output file, failed lines in an error file, expired lines with
``error.code = batch_expired``. Anthropic: ``POST /v1/messages/batches``, ``GET .../{id}``,
``POST .../{id}/cancel``, ``GET .../{id}/results`` (JSONL of succeeded / errored / canceled /
expired results), ``GET /v1/messages/batches`` (newest first, ``limit``, ``after_id``, ``before_id``),
processing_status in_progress -> canceling -> ended.

Azure OpenAI (Global Batch; Microsoft Learn, how-to/batch and its batch-rest.md / batch-python.md /
global-batch-limits.md includes): OpenAI's routes under ``/openai`` instead of ``/v1``
(``/openai/files``, ``/openai/files/{id}[/content]``, ``/openai/batches[/{id}[/cancel]]``), each with
the ``api-version`` query and the ``api-key`` header (``azure_key``) or an Entra ID bearer token
(``azure_token``), refused with Azure's error body (``{"error": {"code", "message"}}``) otherwise.
Input lines must share one ``url`` (``/chat/completions``, ``/v1/chat/completions`` or ``/v1/responses``)
and one ``body.model`` naming a deployment (``deployments``), at most 100,000 of them: else the batch
fails validation with Azure's code (``url_mismatch``, ``model_mismatch``, ``model_not_found``,
``too_many_tasks``). Azure batch objects carry ``metadata: null``; a file keeps its ``filename``.

Each line is answered, when its batch finishes, by a ``ScriptedModelServer``'s rule through the same
code that answers a synchronous request, so a batch line and a direct call get the same reply. A batch
finishes after ``polls_to_finish`` retrievals (one number, or a list: one per batch); ``next_outcomes``
makes the next batches expire (all lines, or ``expire_half``) or fail validation. ``answered`` counts,
per custom id, how often a line was answered (paid for): a client that resubmits one shows up there.

For a client killed around a batch create: ``create_reply_delay_s`` (one number, or a list: one per
create) holds the reply of a create *after* the batch exists; ``stall_creates`` makes the next creates
hang *without* creating anything (the request never reached the provider), answered 503 after
``stall_s`` or when the server stops.

Injected faults (each a count of the next occurrences, taken one by one): ``fail_polls`` (a batch
retrieval answers 500), ``fail_downloads`` (a results download answers 500), ``refuse_creates`` (a create
answers 429 and creates nothing), ``fail_listings`` (a listing answers 500); ``flip_after_end`` (the next
batches, once ended, show ``in_progress`` without result files on the retrieval after the one that
ended them); ``flip_every_other`` (the next batches, once ended, show ``in_progress`` without result
files on every other retrieval: the 1st, 3rd, ... after the one that ended them); ``bad_lines`` (the
next batches' result files get a line that is not JSON, a blank line and a line without ``custom_id``
besides their real lines); ``conflicting`` (the next batches' result
files repeat each succeeded line as an error after it); ``next_outcomes`` ``"failed"`` fails a batch
as a whole with ``failure_reason`` (OpenAI ``errors``). ``created_lines`` counts every line of every
create (what a client asked to be paid for).
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import time
import urllib.parse
from collections import Counter
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from giant_assets.demo import batch_gemini
from giant_assets.demo.batch_emulator_base import BatchEmulator, EmulatedBatch
from giant_assets.demo.scripted import ScriptedModelServer

OPENAI_PATHS = {"/v1/responses": "/v1/responses", "/v1/chat/completions": "/v1/chat/completions"}
AZURE_LINE_URLS = frozenset({"/chat/completions", "/v1/chat/completions", "/v1/responses"})
AZURE_MAX_REQUESTS = 100_000
AZURE_DENIED = (
    "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid "
    "key for an active subscription and use a correct regional API endpoint for your resource."
)
AZURE_BAD_TOKEN = (
    "Unauthorized. Access token is missing, invalid, audience is incorrect "
    "(https://cognitiveservices.azure.com), or have expired."
)
EXPIRED_MESSAGE = "This request could not be executed before the completion window expired."


class BatchAPIServer(BatchEmulator):
    """Loopback batch APIs on 127.0.0.1 answering lines with ``model``'s rule; a context manager."""

    def __init__(
        self, model: ScriptedModelServer, polls_to_finish: int | list[int] = 2, port: int = 0
    ) -> None:
        super().__init__(model, polls_to_finish)
        self._serve(ThreadingHTTPServer(("127.0.0.1", port), _handler(self)))

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
        to_wire = self.anthropic_object if kind == "anthropic" else self.openai_object
        return {
            "object": "list",
            "data": [to_wire(b) for b in page],
            "has_more": len(items) > limit,
            "first_id": page[0].id if page else None,
            "last_id": page[-1].id if page else None,
        }

    def _result_files(self, batch: EmulatedBatch) -> None:
        """OpenAI's (and Azure's) output file of answered lines and error file of the others."""
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
        if batch.conflicting:
            err += [
                x | {"response": {"status_code": 500, "request_id": "req_x", "body": {"error": "conflict"}}}
                for x in out
            ]
        if out:
            batch.output_file_id = self._new_id("file")
            self.files[batch.output_file_id] = _jsonl(out, batch.bad_lines)
        if err:
            batch.error_file_id = self._new_id("file")
            self.files[batch.error_file_id] = _jsonl(err, batch.bad_lines and not out)

    # ------------------------------------------------------------ wire objects

    def openai_object(self, b: EmulatedBatch) -> dict[str, Any]:
        done = [r for r in b.results or [] if r["kind"] == "answered" and r["status"] < 400]
        if b.results is not None and not self.shown_ended(b):
            shown = EmulatedBatch(b.id, b.kind, b.endpoint, b.lines, b.created_at, status="in_progress",
                           input_file_id=b.input_file_id, metadata=b.metadata)  # fmt: skip
            return self.openai_object(shown)
        failed = b.status == "failed"
        code, message = b.failure or self.failure_reason
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
            "metadata": None if b.kind == "azure" else b.metadata,
            "errors": {
                "object": "list",
                "data": [{"code": code, "message": message, "line": None}],
            }
            if failed
            else None,  # fmt: skip
            "request_counts": {
                "total": len(b.lines),
                "completed": len(done),
                "failed": len(b.results or []) - len(done),
            },
        }

    def anthropic_object(self, b: EmulatedBatch) -> dict[str, Any]:
        kinds = Counter(_anthropic_type(r) for r in b.results or [])
        ended = self.shown_ended(b)
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

    def anthropic_results(self, b: EmulatedBatch) -> bytes:
        lines = []
        for r in b.results or []:
            kind = _anthropic_type(r)
            result: dict[str, Any] = {"type": kind}
            if kind == "succeeded":
                result["message"] = r["body"]
            elif kind == "errored":
                inner = r["body"].get("error") if isinstance(r["body"].get("error"), dict) else {}
                result["error"] = _anthropic_error(r["status"], inner.get("message") or json.dumps(r["body"]))
            lines.append({"custom_id": r["custom_id"], "result": result})
        if b.conflicting:
            lines += [
                {
                    "custom_id": x["custom_id"],
                    "result": {"type": "errored", "error": _anthropic_error(500, "x")},
                }
                for x in lines
                if x["result"]["type"] == "succeeded"
            ]
        return _jsonl(lines, b.bad_lines)


ANTHROPIC_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                         404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                         529: "overloaded_error"}  # fmt: skip


def _anthropic_error(status: int, message: str) -> dict[str, Any]:
    """An errored result's ``error`` as Anthropic writes it: the error type its HTTP status stands for."""
    kind = ANTHROPIC_ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def _jsonl(rows: list[dict[str, Any]], bad: bool) -> bytes:
    """Rows as JSONL; ``bad``: with a line that is not JSON, a blank line and one without custom_id."""
    lines = [json.dumps(x) for x in rows]
    if bad:
        lines[1:1] = ['{"custom_id": "torn', "", json.dumps({"result": {"type": "succeeded"}})]
    return "".join(line + "\n" for line in lines).encode()


def _fault_of(parts: list[str]) -> str:
    """Which injected fault counter a GET of ``parts`` draws on."""
    if parts[:2] == ["v1", "files"] and parts[-1:] == ["content"] or parts[-1:] == ["results"]:
        return "fail_downloads"
    if parts[-1].endswith(":download"):  # gemini
        return "fail_downloads"
    if parts[-1:] == ["batches"] or parts[:2] == ["v1", "files"]:  # a listing, or (Azure) its file look-ups
        return "fail_listings"
    return "fail_polls"


def _anthropic_type(r: dict[str, Any]) -> str:
    if r["kind"] != "answered":
        return r["kind"]
    return "succeeded" if r["status"] < 400 else "errored"


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


def _multipart(content_type: str, body: bytes) -> tuple[dict[str, bytes], dict[str, str]]:
    """The form's fields, and the file names of its file fields."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body
    )
    fields, names = {}, {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        fields[name] = part.get_payload(decode=True)
        if part.get_filename():
            names[name] = part.get_filename()
    return fields, names


def _azure_validation(lines: list[dict[str, Any]], deployments: set[str] | None) -> tuple[str, str] | None:
    """Why Azure's validation fails a batch of these input lines (its documented error codes); None: ok."""
    urls = {line.get("url") for line in lines}
    models = {(line.get("body") or {}).get("model") for line in lines}
    if len(lines) > AZURE_MAX_REQUESTS:
        return "too_many_tasks", f"The number of requests exceeds the maximum of {AZURE_MAX_REQUESTS}."
    if len(urls) != 1 or not urls <= AZURE_LINE_URLS:
        return "url_mismatch", f"The request URLs {sorted(map(str, urls))} do not match one batch endpoint."
    if len(models) != 1:
        return "model_mismatch", "The deployment name in 'model' differs between lines of the input file."
    (model,) = models
    if deployments is not None and model not in deployments:
        return "model_not_found", f"The deployment {model!r} in 'model' was not found."
    return None


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

        kind = "openai"  # of the request being answered: "azure" at the /openai routes

        def _error(self, status: int, message: str, code: str = "") -> None:
            """An error in the wire's shape: Azure's ``{"error": {"code", "message"}}``, else OpenAI's."""
            if self.kind == "azure":
                return self._reply(status, {"error": {"code": code or str(status), "message": message}})
            kinds = {404: "not_found_error", 429: "rate_limit_error", 500: "api_error"}
            return self._reply(status, {"error": {"type": kinds.get(status, "invalid_request_error"),
                                                  "message": message}})  # fmt: skip

        def _not_found(self) -> None:
            self._error(404, f"no route {self.path}", "NotFound")

        def _batch(self, batch_id: str, kind: str) -> EmulatedBatch | None:
            batch = server.batches.get(batch_id)
            return batch if batch is not None and batch.kind == kind else None

        def _route(self) -> tuple[str, dict[str, str], str | None]:
            """(path, query) of the request, Azure's ``/openai/...`` routes read as ``/v1/...``, and why
            Azure refuses it (no api-version, a wrong key or token), else None."""
            path, _, qs = self.path.partition("?")
            query = {k: v[-1] for k, v in urllib.parse.parse_qs(qs).items()}
            server.calls.append((self.command, path))
            self.kind = "azure" if path.startswith("/openai/") else "openai"
            if self.kind == "openai":
                return path, query, None
            path = "/v1/" + path.removeprefix("/openai/")
            if not query.get("api-version"):
                return path, query, "Missing required query parameter: api-version"
            key, auth = self.headers.get("api-key"), self.headers.get("Authorization") or ""
            server.azure_auth.append("bearer" if auth.startswith("Bearer ") else "api-key" if key else "")
            if server.azure_key is not None and key != server.azure_key:
                return path, query, AZURE_DENIED
            if server.azure_token is not None and (key or auth != f"Bearer {server.azure_token}"):
                return path, query, AZURE_BAD_TOKEN
            return path, query, None

        def _refuse(self, why: str) -> None:
            status = 400 if "api-version" in why else 401
            self._error(status, why, "BadRequest" if status == 400 else "401")

        def do_GET(self) -> None:  # noqa: N802
            path, query, refused = self._route()
            if refused:
                return self._refuse(refused)
            parts = path.strip("/").split("/")
            fault = server.take(_fault_of(parts))
            if parts[0] in batch_gemini.ROOTS:
                if fault:
                    return self._reply(500, batch_gemini.error(500, "injected 500"))
                return batch_gemini.handle(server, self, "GET", parts, query, b"")
            if fault:
                return self._error(500, "injected 500")
            if parts[:2] == ["v1", "files"] and len(parts) == 4 and parts[3] == "content":
                data = server.files.get(parts[2])
                return self._reply(200, data, raw=True) if data is not None else self._not_found()
            if parts[:2] == ["v1", "files"] and len(parts) == 3:
                if parts[2] not in server.files:
                    return self._not_found()
                return self._reply(200, _file_object(parts[2], server))
            if parts[:2] == ["v1", "batches"] and len(parts) == 3:
                batch = self._batch(parts[2], self.kind)
                if batch is None:
                    return self._not_found()
                server._advance(batch)
                return self._reply(200, server.openai_object(batch))
            if parts[:2] == ["v1", "batches"] and len(parts) == 2:
                return self._reply(200, server.listing(self.kind, query))
            if parts == ["v1", "messages", "batches"]:
                page = server.listing("anthropic", query)
                return self._reply(200, {k: v for k, v in page.items() if k != "object"})
            if parts[:3] == ["v1", "messages", "batches"] and len(parts) in (4, 5):
                batch = self._batch(parts[3], "anthropic")
                if batch is None:
                    return self._not_found()
                if len(parts) == 5 and parts[4] == "results":
                    if not server.shown_ended(batch):
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
            path, _, refused = self._route()
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if refused:
                return self._refuse(refused)
            parts = path.strip("/").split("/")
            if parts[0] in batch_gemini.ROOTS:
                query = {k: v[-1] for k, v in urllib.parse.parse_qs(self.path.partition("?")[2]).items()}
                return batch_gemini.handle(server, self, "POST", parts, query, body)
            if path == "/v1/files":
                fields, names = _multipart(self.headers.get("Content-Type", ""), body)
                if fields.get("purpose") != b"batch" or "file" not in fields:
                    return self._error(400, "purpose must be batch, with a file")
                file_id = server._new_id("file")
                server.files[file_id] = fields["file"]
                server.file_names[file_id] = names.get("file", "upload.jsonl")
                return self._reply(200, _file_object(file_id, server))
            if path == "/v1/batches" and self.kind == "azure":
                return self._azure_create(json.loads(body))
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
                if server.take("refuse_creates"):
                    return self._reply(429, {"error": {"message": "injected 429: too many batches"}})
                if server.failed_create():
                    return self._reply(500, {"error": {"message": "injected 500 on create"}})
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
                batch = self._batch(parts[2], self.kind)
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
                if server.take("refuse_creates"):
                    refused = {"type": "rate_limit_error", "message": "injected 429"}
                    return self._reply(429, {"type": "error", "error": refused})
                if server.failed_create():
                    failed = {"type": "api_error", "message": "injected 500 on create"}
                    return self._reply(500, {"type": "error", "error": failed})
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

        def _azure_create(self, req: dict[str, Any]) -> None:
            """Azure's batch create: the file's lines are validated by the batch (``validating`` ->
            ``failed`` with Azure's code), not by the create; ``completion_window`` must be 24h."""
            data = server.files.get(req.get("input_file_id") or "")
            if data is None:
                return self._error(404, f"File {req.get('input_file_id')!r} not found.", "NotFound")
            if req.get("completion_window") != "24h":
                return self._error(400, "completion_window must be 24h.", "invalid_request")
            rows = [json.loads(raw) for raw in data.splitlines() if raw.strip()]
            lines = [(r["custom_id"], r["body"]) for r in rows]
            if server._stall_create():
                return self._error(503, "stalled create: no batch", "ServiceUnavailable")
            if server.take("refuse_creates"):
                return self._error(429, "injected 429: too many batches", "429")
            if server.failed_create():
                return self._error(500, "injected 500 on create", "InternalServerError")
            urls = {r.get("url") for r in rows}
            batch = server._create(
                "azure",
                urls.pop() if len(urls) == 1 else "",
                lines,
                input_file_id=req["input_file_id"],
                failure=_azure_validation(rows, server.deployments),
            )
            server._hold_create_reply()
            return self._reply(200, server.openai_object(batch))

    return Handler


def _file_object(file_id: str, server: BatchAPIServer) -> dict[str, Any]:
    return {
        "id": file_id,
        "object": "file",
        "bytes": len(server.files[file_id]),
        "created_at": int(time.time()),
        "filename": server.file_names.get(file_id, "batch.jsonl"),
        "purpose": "batch",
        "status": "processed",
    }
