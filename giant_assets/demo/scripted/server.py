"""The scripted model's loopback HTTP server: a script then a rule answer each request; input tokens
follow the providers' image rules plus 1 token per 4 characters of text, and a request whose leading
turns were seen before reports them as cached."""

from __future__ import annotations

import hashlib
import io
import json
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl

from PIL import Image

from giant_assets.agents.pricing import image_tokens
from giant_assets.demo.loopback import LoopbackServer
from giant_assets.demo.scripted import chat, gemini, messages, responses
from giant_assets.demo.scripted.policy import DEMO_MODEL, demo_policy
from giant_assets.demo.scripted.recorded import Headers, RecordedRequest
from giant_assets.demo.scripted.replies import TOOL_NAME, Reply, ReplyParts
from giant_assets.demo.scripted.routes import refusal
from giant_assets.demo.scripted.turns import Turn

IDENTITY_PATH = "/scripted-model"
TOKEN_PATH = "/token"  # an OAuth token endpoint (a service account's token_uri may point here)

Rule = Callable[[RecordedRequest], Reply]


class ScriptedModelServer(LoopbackServer):
    """Loopback model server on 127.0.0.1 (port 0 = any free port); a context manager."""

    def __init__(
        self, script: Sequence[Reply] = (), rule: Rule | None = None, latency_s: float = 0.0, port: int = 0
    ) -> None:
        self.script = list(script)
        self.rule = rule
        # the demo policy's version, advertised at GET /scripted-model so make demo can tell an older one
        self.demo_model = DEMO_MODEL if rule is demo_policy else None
        self.latency_s = latency_s
        self.requests: list[RecordedRequest] = []
        self.replies: list[Reply] = []  # what was sent, parallel to ``requests``
        self.refused: list[RecordedRequest] = []  # refused at their route (``routes.refusal``)
        self.token_requests: list[RecordedRequest] = []  # at TOKEN_PATH
        self.access_token = f"ya29.scripted-{secrets.token_hex(16)}"  # what TOKEN_PATH hands out
        self._prefixes: set[str] = set()  # hashes of conversation prefixes seen (the "prompt cache")
        self._lock = threading.Lock()
        self._serve(_Server(("127.0.0.1", port), _handler(self)))

    def _next_reply(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            n = len(self.requests)
            scripted = self.script.pop(0) if self.script else None
        if scripted is None and self.rule is None:
            scripted = Reply(status=500, text=f"scripted model: script exhausted at request {n}")
        elif scripted is None:
            try:
                scripted = self.rule(request)
            except Exception as exc:  # report a broken rule to the client instead of hanging it
                scripted = Reply(status=500, text=f"scripted model: rule failed: {exc!r}")
        with self._lock:
            self.replies.append(scripted)
        return scripted

    def answer(self, path: str, body: bytes, headers: Mapping[str, str] = ()) -> tuple[int, bytes]:
        """(status, body) of the reply to one request, as the HTTP handler sends it (no latency): what a
        batch API (``demo/batch_api.py``) computes for each line of a batch."""
        request = RecordedRequest(path, Headers(headers), body, time.monotonic())
        reply = self._next_reply(request)
        if reply.body is not None:
            return reply.status, reply.body
        if reply.status >= 400:
            return reply.status, _error_body(request, reply)
        return reply.status, _wire_body(request, reply, self._cached_tokens(request))

    def _cached_tokens(self, request: RecordedRequest) -> tuple[int, int, int]:
        """(input tokens, of which cached, of which newly cached) for the request's conversation.

        The cache holds every prefix of turns sent before; Anthropic caches only with ``cache_control``.
        """
        counts = [_turn_tokens(request, t) for t in request.turns] + [_tools_tokens(request)]
        keys = _prefix_keys(request)
        uses_cache = request.wire != "messages" or b'"cache_control"' in request.body
        with self._lock:
            hit = max((k for k, key in enumerate(keys, 1) if key in self._prefixes), default=0)
            if uses_cache:
                self._prefixes.update(keys)
        total = sum(counts)
        cached = sum(counts[:hit]) + (counts[-1] if hit else 0) if uses_cache else 0
        written = total - cached if uses_cache and request.wire == "messages" else 0
        return total, cached, written


def scripted_model_at(port: int, timeout_s: float = 2.0) -> dict[str, Any] | None:
    """What a scripted model of this project on 127.0.0.1:``port`` says of itself (``demo_model``: the
    policy it answers with, when it is the demo's), or None when nothing of ours answers there."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{IDENTITY_PATH}", timeout=timeout_s) as reply:
            identity = json.loads(reply.read())
    except (OSError, ValueError):
        return None
    ours = isinstance(identity, dict) and identity.get("scripted_model") == "giant-assets"
    return identity if ours else None


def is_scripted_model(port: int, timeout_s: float = 2.0) -> bool:
    """True when a scripted model of this project answers on 127.0.0.1:``port``."""
    return scripted_model_at(port, timeout_s) is not None


def serve_demo_model(latency_s: float = 0.0, port: int = 0) -> ScriptedModelServer:
    """A started server answering every request with ``demo_policy``; call ``stop()`` when done.

    ``port`` 0 takes any free port; a fixed port that is taken falls back to a free one.
    """
    try:
        server = ScriptedModelServer(rule=demo_policy, latency_s=latency_s, port=port)
    except OSError:
        server = ScriptedModelServer(rule=demo_policy, latency_s=latency_s)
    return server.start()


def _turn_tokens(request: RecordedRequest, turn: Turn) -> int:
    provider = {"messages": "anthropic", "gemini": "gemini"}.get(request.wire, "openai")
    text = sum(len(t) for t in turn.texts) + len(json.dumps(turn.tool_calls))
    images = 0
    for raw in turn.images:
        w, h = Image.open(io.BytesIO(raw)).size
        images += image_tokens(provider, w, h, str((request.json or {}).get("model", "")))
    return text // 4 + images + 4


def _tools_tokens(request: RecordedRequest) -> int:
    return len(json.dumps((request.json or {}).get("tools") or [])) // 4


def _prefix_keys(request: RecordedRequest) -> list[str]:
    """A chained hash per prefix of the request's turns (prefix k: turns[:k]), under wire and model."""
    digest = hashlib.sha256(f"{request.wire}|{(request.json or {}).get('model', '')}".encode())
    keys = []
    for t in request.turns:
        digest.update(repr((t.role, t.texts, t.tool_calls)).encode())
        for image in t.images:
            digest.update(hashlib.sha256(image).digest())
        keys.append(digest.copy().hexdigest())
    return keys


# ---------------------------------------------------------------- wire format


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # many clients connect at once in concurrency tests and benchmarks


def _handler(server: ScriptedModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real APIs do

        def setup(self) -> None:
            super().setup()
            # no Nagle: small responses on a kept-alive connection must not wait for delayed ACKs
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def log_message(self, *args: object) -> None:  # quiet tests
            pass

        def do_GET(self) -> None:  # noqa: N802
            """``GET /scripted-model``: who is listening (the demo reuses a scripted model it finds)."""
            found = self.path.split("?")[0] == IDENTITY_PATH
            identity = {"scripted_model": "giant-assets", "demo_model": server.demo_model}
            body = json.dumps(identity if found else {"error": "no route"}).encode()
            self._send(200 if found else 404, body, {})

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            path, _, raw_query = self.path.partition("?")
            query = dict(parse_qsl(raw_query))
            request = RecordedRequest(path, Headers(self.headers.items()), body, time.monotonic(), query)
            if path == TOKEN_PATH:  # Google's OAuth token endpoint, for credentials whose token_uri is here
                server.token_requests.append(request)
                token = {"access_token": server.access_token, "expires_in": 3600, "token_type": "Bearer"}
                self._send(200, json.dumps(token).encode(), {})
                return
            if not request.wire:
                self._send(404, json.dumps({"error": {"message": f"no route {path}"}}).encode(), {})
                return
            problem = refusal(path, query, request.headers, request.json)
            if problem:  # refused as the provider would, before the script sees it
                server.refused.append(request)
                self._send(400, _error_body(request, Reply(status=400, text=problem)), {})
                return
            reply = server._next_reply(request)
            time.sleep(server.latency_s + reply.delay_s)
            if reply.body is not None:
                payload = reply.body
            elif reply.status >= 400:
                payload = _error_body(request, reply)
            else:
                payload = _wire_body(request, reply, server._cached_tokens(request))
            self._send(reply.status, payload, reply.headers)

        def _send(self, status: int, payload: bytes, headers: Mapping[str, str]) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
                pass

    return Handler


def _error_body(request: RecordedRequest, reply: Reply) -> bytes:
    message = reply.text or f"HTTP {reply.status}"
    if reply.echo_auth:
        auth = request.headers.get("x-api-key") or request.headers.get("Authorization") or ""
        message = f"invalid credentials: {auth!r}"
    if request.provider == "bedrock":  # Bedrock's own shape; its kind in x-amzn-ErrorType
        return json.dumps({"message": message}).encode()
    google = request.provider in ("gemini", "vertex-gemini")
    if google or (request.provider == "vertex" and reply.status in (401, 403)):
        status = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 429: "RESOURCE_EXHAUSTED"}
        error = {"code": reply.status, "message": message, "status": status.get(reply.status, "INTERNAL")}
        return json.dumps({"error": error}).encode()
    if request.wire == "messages":
        return json.dumps({"type": "error", "error": {"type": "error", "message": message}}).encode()
    return json.dumps({"error": {"type": "invalid_request_error", "message": message}}).encode()


def _final_text(request: RecordedRequest, reply: Reply) -> tuple[str, dict[str, Any] | None]:
    """(text, tool arguments or None) of a reply, as the request's protocol wants them."""
    tools_offered = TOOL_NAME in request.tools
    args = reply.tool_args
    if args is None and reply.crop is not None:
        args = dict(zip(("x0", "y0", "w", "h"), reply.crop, strict=True))
    if args is not None:
        if tools_offered:
            return reply.text, args
        x, y, w, h = (args.get(k) for k in ("x0", "y0", "w", "h"))
        action = {"action": "crop", "x": x, "y": y, "w": w, "h": h}
        return f"{reply.text}\n```json\n{json.dumps(action)}\n```", None
    if reply.answer is not None:
        if not request.tools:  # the JSON protocol; any tool offered: tool protocol
            return f"{reply.text} {json.dumps({'action': 'answer', 'answer': reply.answer})}", None
        value = reply.answer if isinstance(reply.answer, dict) else {"answer": reply.answer}
        return f"<report>{reply.text}</report>\n<response>{json.dumps(value)}</response>", None
    return reply.text, None


def _wire_body(request: RecordedRequest, reply: Reply, tokens: tuple[int, int, int]) -> bytes:
    body = request.json if isinstance(request.json, dict) else {}
    params = request.route_params  # Bedrock, Vertex and Gemini name the model in the path
    model = str(body.get("model") or params.get("model") or params.get("deployment") or "scripted")
    text, args = _final_text(request, reply)
    calls = [(TOOL_NAME, args)] if args is not None else []
    if reply.calls and request.tools:
        calls = list(reply.calls)
    args = calls[0][1] if calls else None
    rid = hashlib.sha256(request.body).hexdigest()[:16]
    ids = [rid if n == 0 else f"{rid}_{n}" for n in range(len(calls))]
    n_in, cached, written = tokens
    if reply.cached is not None:
        cached, written = reply.cached, 0
    thinking = reply.reasoning if request.reasoning_enabled else ""
    n_out = len(text) // 4 + len(json.dumps(calls)) // 4 + len(thinking) // 4 + 1
    if reply.usage is not None:
        n_in, n_out = reply.usage
    cached, written = min(cached, n_in), min(written, n_in - min(cached, n_in))
    parts = ReplyParts(
        body=body, model=model, text=text, calls=calls, ids=ids, rid=rid, args=args,
        n_in=n_in, n_out=n_out, cached=cached, written=written, thinking=thinking,
    )  # fmt: skip
    wire = {"messages": messages, "responses": responses, "gemini": gemini}.get(request.wire, chat)
    return json.dumps(wire.reply_body(parts)).encode()
