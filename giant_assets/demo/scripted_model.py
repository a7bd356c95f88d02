"""A real loopback HTTP server speaking the OpenAI chat-completions and Anthropic messages wire formats.

Replies come from a script (consumed in order), then from a rule function of the request, e.g.
``demo_policy``, which navigates like a cautious model without any key: it crops the darkest region
of the thumbnail it was sent, then answers with a valid option or ``{"isup_grade": k}``. Every request
is recorded (headers, body, arrival time) so tests can check what the client really sent.

    with ScriptedModelServer(rule=demo_policy) as server:
        model = OpenAIChatModel("demo", base_url=server.openai_base_url)
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
from PIL import Image
from scipy import ndimage

IMAGE_TOKENS = 765  # what the server reports per image (OpenAI's count for a 1024 px high-detail image)
OPENAI_PATHS = ("/v1/chat/completions", "/chat/completions")
ANTHROPIC_PATHS = ("/v1/messages",)


@dataclass(frozen=True)
class Reply:
    """One scripted response. ``text`` is wrapped in the wire format; ``body`` is sent verbatim instead."""

    text: str = ""
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | None = None
    delay_s: float = 0.0  # on top of the server's latency
    echo_auth: bool = False  # put the request's auth header into the error body (a careless server)
    usage: tuple[int, int] | None = None  # (input, output) tokens to report; None: estimated from the request


def crop_reply(x: int, y: int, w: int, h: int, prose: str = "Let me look closer.") -> Reply:
    return Reply(f'{prose}\n```json\n{{"action": "crop", "x": {x}, "y": {y}, "w": {w}, "h": {h}}}\n```')


def answer_reply(answer: Any, prose: str = "Final answer.") -> Reply:
    return Reply(f"{prose} {json.dumps({'action': 'answer', 'answer': answer})}")


def rate_limited(retry_after: float | str = 1) -> Reply:
    return Reply(status=429, headers={"Retry-After": str(retry_after)}, text="rate limit reached, slow down")


def server_error(status: int = 500) -> Reply:
    return Reply(status=status, text="internal server error (scripted)")


def malformed(status: int = 200) -> Reply:
    return Reply(status=status, body=b'{"choices": [{"message": {"content": "trunc')


def unauthorized_echo() -> Reply:
    return Reply(status=401, echo_auth=True)


@dataclass(frozen=True)
class Turn:
    role: str
    texts: tuple[str, ...]
    images: tuple[bytes, ...]  # decoded image file bytes


@dataclass
class RecordedRequest:
    """What the server received, decoded for assertions."""

    path: str
    headers: dict[str, str]
    body: bytes
    received_at: float  # time.monotonic()

    @property
    def wire(self) -> str:
        return "anthropic" if self.path in ANTHROPIC_PATHS else "openai"

    @cached_property
    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    @cached_property
    def turns(self) -> list[Turn]:
        """The conversation as role/texts/images, whichever wire format carried it."""
        body = self.json if isinstance(self.json, dict) else {}
        turns = [Turn("system", (body["system"],), ())] if isinstance(body.get("system"), str) else []
        for msg in body.get("messages") or []:
            content = msg.get("content")
            parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
            texts, images = [], []
            for p in parts:
                if p.get("type") == "text":
                    texts.append(p.get("text", ""))
                elif p.get("type") == "image_url":
                    images.append(base64.b64decode(p["image_url"]["url"].split(",", 1)[1]))
                elif p.get("type") == "image":
                    images.append(base64.b64decode(p["source"]["data"]))
            turns.append(Turn(msg.get("role", ""), tuple(texts), tuple(images)))
        return turns

    @property
    def text(self) -> str:
        return "\n".join(t for turn in self.turns for t in turn.texts)

    @property
    def images(self) -> list[Image.Image]:
        return [Image.open(io.BytesIO(b)) for turn in self.turns for b in turn.images]

    @property
    def assistant_turns(self) -> int:
        return sum(turn.role == "assistant" for turn in self.turns)


Rule = Callable[[RecordedRequest], Reply]


class ScriptedModelServer:
    """Loopback model server on 127.0.0.1 (port 0 = any free port); a context manager."""

    def __init__(
        self, script: Sequence[Reply] = (), rule: Rule | None = None, latency_s: float = 0.0, port: int = 0
    ) -> None:
        self.script = list(script)
        self.rule = rule
        self.latency_s = latency_s
        self.requests: list[RecordedRequest] = []
        self.replies: list[Reply] = []  # what was sent, parallel to ``requests``
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", port), _handler(self))
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.base_url}/v1"

    def start(self) -> ScriptedModelServer:
        if self._thread is None:
            self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
            self._thread = None
        self._httpd.server_close()

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

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


def serve_demo_model(latency_s: float = 0.0, port: int = 0) -> ScriptedModelServer:
    """A started server answering every request with ``demo_policy``; call ``stop()`` when done.

    ``port`` 0 takes any free port; a fixed port that is taken falls back to a free one.
    """
    try:
        server = ScriptedModelServer(rule=demo_policy, latency_s=latency_s, port=port)
    except OSError:
        server = ScriptedModelServer(rule=demo_policy, latency_s=latency_s)
    return server.start()


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

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            path = self.path.split("?")[0]
            request = RecordedRequest(path, dict(self.headers.items()), body, time.monotonic())
            if path not in (*OPENAI_PATHS, *ANTHROPIC_PATHS):
                self._send(404, json.dumps({"error": {"message": f"no route {path}"}}).encode(), {})
                return
            reply = server._next_reply(request)
            time.sleep(server.latency_s + reply.delay_s)
            payload = reply.body if reply.body is not None else _wire_body(request, reply)
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


def _wire_body(request: RecordedRequest, reply: Reply) -> bytes:
    body = request.json if isinstance(request.json, dict) else {}
    model = str(body.get("model", "scripted"))
    anthropic = request.wire == "anthropic"
    if reply.status >= 400:
        message = reply.text or f"HTTP {reply.status}"
        if reply.echo_auth:
            auth = request.headers.get("x-api-key") or request.headers.get("Authorization") or ""
            message = f"invalid credentials: {auth!r}"
        err = {"type": "error" if anthropic else "invalid_request_error", "message": message}
        return json.dumps({"type": "error", "error": err} if anthropic else {"error": err}).encode()
    n_in = len(request.text) // 4 + IMAGE_TOKENS * sum(len(t.images) for t in request.turns)
    n_in, n_out = reply.usage or (n_in, len(reply.text) // 4 + 1)
    rid = hashlib.sha256(request.body).hexdigest()[:16]
    if anthropic:
        out = {
            "id": f"msg_{rid}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": reply.text}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": n_in, "output_tokens": n_out},
        }
    else:
        out = {
            "id": f"chatcmpl-{rid}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": reply.text}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out},
        }
    return json.dumps(out).encode()


# ---------------------------------------------------------------- demo policy

_SLIDE_SIZE = re.compile(r"(\d+) x (\d+) level-0 pixels")
_SLIDE_AREA = re.compile(r"occupies image pixels x (\d+)\.\.(\d+), y (\d+)\.\.(\d+)")
_OPTION = re.compile(r"^\s*(\d+)\.\s+\S", re.MULTILINE)
DARK_LUMA = 110  # lesion-like: well below tissue (~180) and background (~240)


def demo_policy(request: RecordedRequest) -> Reply:
    """First crop the largest dark region of the thumbnail (or the slide centre), then answer."""
    first_user = next((t for t in request.turns if t.role == "user"), None)
    if first_user is None:
        return Reply(status=400, text="scripted model: no user message")
    prompt = "\n".join(first_user.texts)
    if request.assistant_turns == 0 and "No crops left" not in request.text:
        box = _dark_region_box(prompt, first_user.images[0] if first_user.images else None)
        if box is not None:
            return crop_reply(*box, prose="The darkest, most cellular area is worth a closer look.")
    images = [b for t in request.turns for b in t.images]
    dark = _dark_fraction(images[-1]) if images else 0.0
    digest = int(hashlib.sha256(prompt.encode()).hexdigest(), 16)
    if "isup_grade" in prompt:
        grade = 0 if dark == 0 else min(5, 1 + int(dark * 8))
        return answer_reply({"isup_grade": grade}, prose=f"Dense dark glands cover {dark:.0%} of the view.")
    n_options = len(_OPTION.findall(prompt))
    choice = (digest + int(dark * 10)) % n_options + 1 if n_options else 1
    return answer_reply(str(choice), prose="Based on the architecture seen,")


def _luma(img: Image.Image) -> np.ndarray:
    return np.asarray(img.convert("L"), dtype=np.uint8)


def _dark_fraction(image_bytes: bytes) -> float:
    return float((_luma(Image.open(io.BytesIO(image_bytes))) < DARK_LUMA).mean())


def _dark_region_box(prompt: str, image_bytes: bytes | None) -> tuple[int, int, int, int] | None:
    """Level-0 box around the largest dark blob of the thumbnail (padded), else the slide's centre half."""
    size = _SLIDE_SIZE.search(prompt)
    if size is None:
        return None
    width, height = int(size[1]), int(size[2])
    centre = (width // 4, height // 4, width // 2, height // 2)
    area = _SLIDE_AREA.search(prompt)
    if area is None or image_bytes is None:
        return centre
    x0, x1, y0, y1 = (int(v) for v in area.groups())
    luma = _luma(Image.open(io.BytesIO(image_bytes)))[y0:y1, x0:x1]
    labels, n = ndimage.label(luma < DARK_LUMA)
    if n == 0:
        return centre
    sizes = ndimage.sum_labels(np.ones_like(labels), labels, index=np.arange(1, n + 1))
    rows, cols = ndimage.find_objects(labels)[int(np.argmax(sizes))]
    sx, sy = width / (x1 - x0), height / (y1 - y0)
    bx, by = cols.start * sx, rows.start * sy
    bw, bh = (cols.stop - cols.start) * sx, (rows.stop - rows.start) * sy
    pad = 0.5 * max(bw, bh)
    return round(bx - pad), round(by - pad), round(bw + 2 * pad), round(bh + 2 * pad)
