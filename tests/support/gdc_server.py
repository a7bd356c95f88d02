"""A loopback stand-in for the GDC API (``/files/<id>`` metadata, ``/data/<id>`` bodies with Range).

Faults per file, each for the first N requests of that file's body: ``corrupt`` (one byte flipped, so
the md5 differs), ``drop_at`` (headers promise the whole body, the connection closes after that many
bytes), ``errors_5xx`` (HTTP 503; also for metadata). ``bytes_per_s`` throttles bodies. Lies:
``published_size`` (the metadata's ``file_size``, its md5 that of the body's first so many bytes, while
the whole body is sent), ``ignore_range`` (always the whole body, HTTP 200), ``drop_every`` (every
response closes after that many bytes), ``metadata_padding`` (spaces after the metadata JSON). Every
request is recorded so tests can tell what was asked and how much was sent.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class ServedFile:
    file_id: str
    file_name: str
    body: bytes
    corrupt: int = 0
    drop_at: dict[int, int] = field(default_factory=dict)  # request number (0-based) -> bytes sent
    errors_5xx: int = 0
    metadata_5xx: int = 0
    bytes_per_s: float | None = None
    published_size: int | None = None
    ignore_range: bool = False
    drop_every: int | None = None
    metadata_padding: int = 0
    data_requests: int = 0


@dataclass(frozen=True)
class Request:
    kind: str  # "files" or "data"
    file_id: str
    range: str | None
    status: int
    bytes_sent: int


class GdcServer:
    """``with GdcServer(files) as gdc:`` serves on ``gdc.url`` (127.0.0.1, a free port)."""

    def __init__(self, files: list[ServedFile]) -> None:
        self.files = {f.file_id: f for f in files}
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                match = re.fullmatch(r"/(files|data)/([^/?]+)(\?.*)?", self.path)
                served = server.files.get(match.group(2)) if match else None
                if served is None:
                    self._reply(404, b'{"message": "not found"}', "files", match.group(2) if match else "")
                elif match.group(1) == "files":
                    server._metadata(self, served)
                else:
                    server._data(self, served)

            def _reply(self, status: int, body: bytes, kind: str, file_id: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                server.record(Request(kind, file_id, self.headers.get("Range"), status, 0))

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}"
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    def __enter__(self) -> GdcServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._http.shutdown()
        self._http.server_close()

    def record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def data_requests(self, file_id: str) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.kind == "data" and r.file_id == file_id]

    def _metadata(self, handler: BaseHTTPRequestHandler, served: ServedFile) -> None:
        with self._lock:
            fail = served.metadata_5xx > 0
            served.metadata_5xx -= fail
        if fail:
            handler._reply(503, b'{"message": "busy"}', "files", served.file_id)
            return
        size = len(served.body) if served.published_size is None else served.published_size
        data = {
            "file_id": served.file_id,
            "file_name": served.file_name,
            "md5sum": hashlib.md5(served.body[:size]).hexdigest(),
            "file_size": size,
        }
        body = json.dumps({"data": data, "warnings": {}}).encode() + b" " * served.metadata_padding
        handler._reply(200, body, "files", served.file_id)

    def _data(self, handler: BaseHTTPRequestHandler, served: ServedFile) -> None:
        with self._lock:
            number = served.data_requests
            served.data_requests += 1
            fail = served.errors_5xx > 0
            served.errors_5xx -= fail
            corrupt = not fail and served.corrupt > 0
            served.corrupt -= corrupt
        rng = None if served.ignore_range else handler.headers.get("Range")
        if fail:
            handler._reply(503, b'{"message": "busy"}', "data", served.file_id)
            return
        body = served.body
        if corrupt:
            body = body[:100] + bytes([body[100] ^ 0xFF]) + body[101:]
        start = int(re.fullmatch(r"bytes=(\d+)-", rng).group(1)) if rng else 0
        if start >= len(body) and rng:
            handler._reply(416, b"", "data", served.file_id)
            return
        part = body[start:]
        handler.send_response(206 if rng else 200)
        handler.send_header("Content-Type", "application/octet-stream")
        handler.send_header("Content-Length", str(len(part)))
        if rng:
            handler.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        handler.end_headers()
        limit = min(served.drop_at.get(number, served.drop_every or len(part)), len(part))
        sent = 0
        try:
            while sent < limit:
                chunk = part[sent : min(limit, sent + 16384)]
                handler.wfile.write(chunk)
                handler.wfile.flush()
                sent += len(chunk)
                if served.bytes_per_s:
                    time.sleep(len(chunk) / served.bytes_per_s)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            self.record(Request("data", served.file_id, rng, 206 if rng else 200, sent))
        if limit < len(part):
            handler.close_connection = True
            handler.connection.shutdown(2)  # drop mid-body, as a broken network does
