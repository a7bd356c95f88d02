"""A real loopback HTTP server speaking three model wire formats, with tool calls, reasoning and caching.

- ``POST /v1/responses`` (OpenAI Responses): function calls, reasoning items (with encrypted content
  when asked), ``usage.input_tokens_details.cached_tokens``;
- ``POST /v1/chat/completions`` (OpenAI Chat Completions, as vLLM/Ollama serve it): ``tool_calls``,
  ``usage.prompt_tokens_details.cached_tokens``;
- ``POST /v1/messages`` (Anthropic Messages): ``tool_use`` and ``thinking`` blocks,
  ``cache_read_input_tokens``/``cache_creation_input_tokens`` when the request marks ``cache_control``.

Replies come from a script (consumed in order), then from a rule function of the request, e.g.
``demo_policy``, which navigates like a cautious model without any key: it crops the darkest region of
the overview it was sent (through the ``slide_zoom`` tool when one is offered, else as a free-JSON
action), then answers ``<report>..</report><response>{json}</response>`` in the benchmark's format.
Input tokens follow the providers' image rules (``pricing.image_tokens``) plus 1 token per 4 characters
of text; a request whose leading turns were seen before reports them as cached. Every request is
recorded (headers, body, arrival time) so tests can check what the SDK really sent.

    with ScriptedModelServer(rule=demo_policy) as server:
        model = OpenAIResponsesModel("demo", base_url=server.openai_base_url)
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

from giant_assets.agents.pricing import image_tokens
from giant_assets.demo.loopback import LoopbackServer

WIRES = {
    "/v1/responses": "responses",
    "/responses": "responses",
    "/v1/chat/completions": "chat",
    "/chat/completions": "chat",
    "/v1/messages": "messages",
}
TOOL_NAME = "slide_zoom"
IDENTITY_PATH = "/scripted-model"


@dataclass(frozen=True)
class Reply:
    """One scripted response: ``text``, and/or a ``crop`` (a slide_zoom call, or a JSON crop action when
    the request offers no tool), or an ``answer`` (wrapped as report/response, or a JSON answer action).
    ``body`` is sent verbatim instead of a wire-format body."""

    text: str = ""
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes | None = None
    delay_s: float = 0.0  # on top of the server's latency
    echo_auth: bool = False  # put the request's auth header into the error body (a careless server)
    usage: tuple[int, int] | None = None  # (input, output) tokens to report; None: estimated
    cached: int | None = None  # cached input tokens to report; None: from the prefixes seen before
    crop: tuple[Any, Any, Any, Any] | None = None  # slide_zoom x0, y0, w, h
    tool_args: dict[str, Any] | None = None  # raw slide_zoom arguments (overrides ``crop``)
    answer: Any = None
    reasoning: str = ""  # reasoning summary / thinking text (sent when the request enables reasoning)
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()  # several tool calls (name, arguments) in one reply


def crop_reply(x: Any, y: Any, w: Any, h: Any, prose: str = "Let me look closer.") -> Reply:
    return Reply(prose, crop=(x, y, w, h), reasoning=f"zoom into {x},{y},{w},{h}")


def answer_reply(answer: Any, prose: str = "Final answer.") -> Reply:
    return Reply(prose, answer=answer, reasoning="enough seen")


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
    """One turn in any wire format. ``tool_calls``: (name, arguments) an assistant turn asked for;
    a ``tool`` turn is a tool result (its text and images)."""

    role: str
    texts: tuple[str, ...]
    images: tuple[bytes, ...]  # decoded image file bytes
    tool_calls: tuple[tuple[str, Any], ...] = ()
    replayed: tuple[str, ...] = ()  # types of provider items sent back (reasoning, thinking)


class Headers(dict):
    """Request headers looked up case-insensitively (SDKs send lower-case names)."""

    def __init__(self, items: Mapping[str, str] | Sequence[tuple[str, str]] = ()) -> None:
        super().__init__({k.lower(): v for k, v in dict(items).items()})

    def __getitem__(self, key: str) -> str:
        return super().__getitem__(key.lower())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and super().__contains__(key.lower())

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key.lower(), default)


@dataclass
class RecordedRequest:
    """What the server received, decoded for assertions."""

    path: str
    headers: dict[str, str]
    body: bytes
    received_at: float  # time.monotonic()

    @property
    def wire(self) -> str:
        """ "responses", "chat" or "messages"."""
        return WIRES.get(self.path, "")

    @cached_property
    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    @property
    def tools(self) -> list[str]:
        """Names of the tools offered."""
        tools = (self.json or {}).get("tools") or []
        return [t.get("name") or (t.get("function") or {}).get("name", "") for t in tools]

    @cached_property
    def turns(self) -> list[Turn]:
        """The conversation as turns, whichever wire format carried it (consecutive assistant items of
        one Responses reply form one turn)."""
        body = self.json if isinstance(self.json, dict) else {}
        parse = {"responses": _responses_turns, "chat": _chat_turns, "messages": _messages_turns}
        return parse.get(self.wire, _chat_turns)(body)

    @property
    def text(self) -> str:
        return "\n".join(t for turn in self.turns for t in turn.texts)

    @property
    def images(self) -> list[Image.Image]:
        return [Image.open(io.BytesIO(b)) for turn in self.turns for b in turn.images]

    @property
    def assistant_turns(self) -> int:
        return sum(turn.role == "assistant" for turn in self.turns)

    @property
    def reasoning_enabled(self) -> bool:
        body = self.json or {}
        return bool(body.get("reasoning") or body.get("reasoning_effort") or body.get("thinking"))


def _b64_url(url: str) -> bytes:
    return base64.b64decode(url.split(",", 1)[1])


def _responses_content(content: Any) -> tuple[list[str], list[bytes]]:
    if isinstance(content, str):
        return [content], []
    texts, images = [], []
    for p in content or []:
        if p.get("type") in ("input_text", "output_text", "text"):
            texts.append(p.get("text", ""))
        elif p.get("type") == "input_image":
            images.append(_b64_url(p["image_url"]))
    return texts, images


def _responses_turns(body: dict[str, Any]) -> list[Turn]:
    turns = [Turn("system", (body["instructions"],), ())] if body.get("instructions") else []
    items = body.get("input")
    items = [{"role": "user", "content": items}] if isinstance(items, str) else items or []
    for item in items:
        kind = item.get("type", "message")
        if kind == "function_call_output":
            texts, images = _responses_content(item.get("output"))
            turns.append(Turn("tool", tuple(texts), tuple(images)))
            continue
        if kind == "message" and item.get("role") != "assistant":
            texts, images = _responses_content(item.get("content"))
            turns.append(Turn(item.get("role", ""), tuple(texts), tuple(images)))
            continue
        # an assistant-side item: merged into the assistant turn it continues
        prev = turns[-1] if turns and turns[-1].role == "assistant" else None
        base = prev or Turn("assistant", (), ())
        texts, calls, replayed = list(base.texts), list(base.tool_calls), list(base.replayed)
        if kind == "function_call":
            calls.append((item.get("name", ""), _loads(item.get("arguments", ""))))
        elif kind == "message":
            texts += _responses_content(item.get("content"))[0]
        else:
            replayed.append(kind)
        turn = Turn("assistant", tuple(texts), (), tuple(calls), tuple(replayed))
        if prev is None:
            turns.append(turn)
        else:
            turns[-1] = turn
    return turns


def _chat_turns(body: dict[str, Any]) -> list[Turn]:
    turns = []
    for msg in body.get("messages") or []:
        content = msg.get("content")
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        texts = [p.get("text", "") for p in parts if p.get("type") == "text"]
        images = [_b64_url(p["image_url"]["url"]) for p in parts if p.get("type") == "image_url"]
        calls = [
            (c["function"]["name"], _loads(c["function"].get("arguments", "")))
            for c in msg.get("tool_calls") or []
        ]
        turns.append(Turn(msg.get("role", ""), tuple(texts), tuple(images), tuple(calls)))
    return turns


def _anthropic_blocks(blocks: Any) -> tuple[list[str], list[bytes]]:
    if isinstance(blocks, str):
        return [blocks], []
    texts = [b.get("text", "") for b in blocks or [] if b.get("type") == "text"]
    images = [base64.b64decode(b["source"]["data"]) for b in blocks or [] if b.get("type") == "image"]
    return texts, images


def _messages_turns(body: dict[str, Any]) -> list[Turn]:
    system = body.get("system")
    if isinstance(system, list):
        system = "\n".join(b.get("text", "") for b in system)
    turns = [Turn("system", (system,), ())] if system else []
    for msg in body.get("messages") or []:
        content = msg.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        if msg.get("role") == "assistant":
            texts = [b.get("text", "") for b in blocks if b.get("type") == "text"]
            calls = [(b.get("name", ""), b.get("input")) for b in blocks if b.get("type") == "tool_use"]
            replayed = [b["type"] for b in blocks if b.get("type") in ("thinking", "redacted_thinking")]
            turns.append(Turn("assistant", tuple(texts), (), tuple(calls), tuple(replayed)))
            continue
        rest = []
        for b in blocks:
            if b.get("type") == "tool_result":
                texts, images = _anthropic_blocks(b.get("content"))
                turns.append(Turn("tool", tuple(texts), tuple(images)))
            else:
                rest.append(b)
        if rest:
            texts, images = _anthropic_blocks(rest)
            turns.append(Turn("user", tuple(texts), tuple(images)))
    return turns


def _loads(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


Rule = Callable[[RecordedRequest], Reply]


class ScriptedModelServer(LoopbackServer):
    """Loopback model server on 127.0.0.1 (port 0 = any free port); a context manager."""

    def __init__(
        self, script: Sequence[Reply] = (), rule: Rule | None = None, latency_s: float = 0.0, port: int = 0
    ) -> None:
        self.script = list(script)
        self.rule = rule
        self.latency_s = latency_s
        self.requests: list[RecordedRequest] = []
        self.replies: list[Reply] = []  # what was sent, parallel to ``requests``
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


def is_scripted_model(port: int, timeout_s: float = 2.0) -> bool:
    """True when a scripted model of this project answers on 127.0.0.1:``port``."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{IDENTITY_PATH}", timeout=timeout_s) as reply:
            return json.loads(reply.read()).get("scripted_model") == "giant-assets"
    except (OSError, ValueError):
        return False


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
    provider = "anthropic" if request.wire == "messages" else "openai"
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
            body = json.dumps({"scripted_model": "giant-assets"} if found else {"error": "no route"}).encode()
            self._send(200 if found else 404, body, {})

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            path = self.path.split("?")[0]
            request = RecordedRequest(path, Headers(self.headers.items()), body, time.monotonic())
            if path not in WIRES:
                self._send(404, json.dumps({"error": {"message": f"no route {path}"}}).encode(), {})
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
    model = str(body.get("model", "scripted"))
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
    if request.wire == "messages":
        content: list[dict[str, Any]] = []
        if thinking:
            content.append({"type": "thinking", "thinking": thinking, "signature": f"sig-{rid}"})
        if text:
            content.append({"type": "text", "text": text})
        content += [
            {"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": a}
            for i, (name, a) in zip(ids, calls, strict=True)
        ]
        out: dict[str, Any] = {
            "id": f"msg_{rid}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": "tool_use" if args is not None else "end_turn",
            "usage": {
                "input_tokens": n_in - cached - written,
                "output_tokens": n_out,
                "cache_read_input_tokens": cached,
                "cache_creation_input_tokens": written,
            },
        }
    elif request.wire == "responses":
        output: list[dict[str, Any]] = []
        if thinking:
            item = {
                "type": "reasoning",
                "id": f"rs_{rid}",
                "summary": [{"type": "summary_text", "text": thinking}],
            }
            if "reasoning.encrypted_content" in (body.get("include") or []):
                item["encrypted_content"] = f"enc-{rid}"
            output.append(item)
        if text:
            output.append({
                "type": "message", "id": f"msg_{rid}", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            })  # fmt: skip
        output += [
            {"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}", "name": name,
             "arguments": json.dumps(a), "status": "completed"}
            for i, (name, a) in zip(ids, calls, strict=True)
        ]  # fmt: skip
        out = {
            "id": f"resp_{rid}", "object": "response", "created_at": int(time.time()), "model": model,
            "status": "completed", "output": output, "parallel_tool_calls": True, "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": n_in, "output_tokens": n_out, "total_tokens": n_in + n_out,
                "input_tokens_details": {"cached_tokens": cached},
                "output_tokens_details": {"reasoning_tokens": len(thinking) // 4},
            },
        }  # fmt: skip
    else:
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            message["tool_calls"] = [
                {"id": f"call_{i}", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(a)}}
                for i, (name, a) in zip(ids, calls, strict=True)
            ]  # fmt: skip
        out = {
            "id": f"chatcmpl-{rid}", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message,
                         "finish_reason": "tool_calls" if args is not None else "stop"}],
            "usage": {
                "prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        }  # fmt: skip
    return json.dumps(out).encode()


# ---------------------------------------------------------------- demo policy

_SLIDE_SIZE = re.compile(r"(\d+) [x×] (\d+) (?:level-0 )?pixels")
_SLIDE_AREA = re.compile(r"occupies image pixels x (\d+)\.\.(\d+), y (\d+)\.\.(\d+)")
_OPTION = re.compile(r"^\s*(\d+)\.\s+\S", re.MULTILINE)
DARK_LUMA = 110  # lesion-like: well below tissue (~180) and background (~240)
LABEL_BLACK_LUMA = 30  # the guide labels' black boxes (lesions are ~65)


def demo_policy(request: RecordedRequest) -> Reply:
    """First crop the largest dark region of the overview (or the slide centre), then answer."""
    first_user = next((t for t in request.turns if t.role == "user"), None)
    if first_user is None:
        return Reply(status=400, text="scripted model: no user message")
    prompt = "\n".join(first_user.texts)
    system = "\n".join(t for turn in request.turns if turn.role == "system" for t in turn.texts)
    if request.assistant_turns == 0 and "No crops left" not in request.text:
        box = _dark_region_box(f"{system}\n{prompt}", first_user.images[0] if first_user.images else None)
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


def _dark_mask(luma: np.ndarray) -> np.ndarray:
    """Dark pixels, opened so guide-label text and thin lines do not count as tissue; the guide labels'
    black boxes (near-black) are not lesion either."""
    dark = (luma < DARK_LUMA) & (luma > LABEL_BLACK_LUMA)
    return ndimage.binary_opening(dark, structure=np.ones((5, 5), bool))


def _dark_fraction(image_bytes: bytes) -> float:
    return float(_dark_mask(_luma(Image.open(io.BytesIO(image_bytes)))).mean())


def _dark_region_box(prompt: str, image_bytes: bytes | None) -> tuple[int, int, int, int] | None:
    """Level-0 box around the largest dark blob of the overview (padded), else the slide's centre half;
    ``prompt`` (the system prompt and the first user turn) states the slide's size. The overview shows
    the whole slide (or, with an ``occupies image pixels`` note, that area of it).
    """
    size = _SLIDE_SIZE.search(prompt)
    if size is None:
        return None
    width, height = int(size[1]), int(size[2])
    centre = (width // 4, height // 4, width // 2, height // 2)
    if image_bytes is None:
        return centre
    luma = _luma(Image.open(io.BytesIO(image_bytes)))
    area = _SLIDE_AREA.search(prompt)
    if area is not None:
        x0, x1, y0, y1 = (int(v) for v in area.groups())
        luma = luma[y0:y1, x0:x1]
    labels, n = ndimage.label(_dark_mask(luma))
    if n == 0:
        return centre
    sizes = ndimage.sum_labels(np.ones_like(labels), labels, index=np.arange(1, n + 1))
    rows, cols = ndimage.find_objects(labels)[int(np.argmax(sizes))]
    sx, sy = width / luma.shape[1], height / luma.shape[0]
    bx, by = cols.start * sx, rows.start * sy
    bw, bh = (cols.stop - cols.start) * sx, (rows.stop - rows.start) * sy
    pad = 0.5 * max(bw, bh)
    return round(bx - pad), round(by - pad), round(bw + 2 * pad), round(bh + 2 * pad)
