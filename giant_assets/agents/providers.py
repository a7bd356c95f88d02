"""Chat models over HTTP: OpenAI-compatible chat completions and Anthropic messages.

Both share one retry loop (exponential backoff with jitter on 429/5xx/timeouts/connection errors,
honouring ``Retry-After``) and an optional shared request-rate limiter. API keys come only from the
environment and are redacted from every error text and log line this module writes.
"""

from __future__ import annotations

import abc
import asyncio
import ipaddress
import json
import logging
import os
import random
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx
from aiolimiter import AsyncLimiter

_LOG = logging.getLogger(__name__)
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
REDACTED = "[REDACTED]"


# ---------------------------------------------------------------- messages and replies


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True)
class ImagePart:
    data_b64: str = field(repr=False)
    media_type: str = "image/jpeg"


@dataclass(frozen=True)
class Message:
    """One chat turn; ``role`` is "system", "user" or "assistant"."""

    role: str
    parts: tuple[TextPart | ImagePart, ...]

    @classmethod
    def system(cls, text: str) -> Message:
        return cls("system", (TextPart(text),))

    @classmethod
    def user(cls, *parts: TextPart | ImagePart) -> Message:
        return cls("user", tuple(parts))

    @classmethod
    def assistant(cls, text: str) -> Message:
        return cls("assistant", (TextPart(text),))

    @property
    def text(self) -> str:
        return "\n".join(p.text for p in self.parts if isinstance(p, TextPart))


@dataclass(frozen=True)
class ModelReply:
    text: str
    input_tokens: int
    output_tokens: int
    latency_s: float  # wall time of the whole call, retries and waits included
    raw_status: int  # HTTP status of the response that was used
    attempts: int = 1
    waited_s: float = 0.0  # time slept between attempts


class ChatModel(Protocol):
    """What an agent needs from a model: one multimodal chat call, and closing."""

    name: str  # model id as the provider knows it

    async def complete(self, messages: Sequence[Message]) -> ModelReply: ...

    async def aclose(self) -> None: ...


# ---------------------------------------------------------------- errors


class ProviderError(RuntimeError):
    """A model call failed; ``status`` is the last HTTP status (None for transport failures)."""

    def __init__(self, message: str, status: int | None = None, attempts: int = 0) -> None:
        super().__init__(message)
        self.status = status
        self.attempts = attempts


class MissingAPIKey(ProviderError):
    """The configured environment variable holds no API key."""


class ProviderHTTPError(ProviderError):
    """A non-retryable HTTP error (4xx other than 408/409/425/429)."""


class MalformedResponse(ProviderError):
    """The server answered 2xx with a body that is not the expected JSON."""


class RetriesExhausted(ProviderError):
    """Retryable failures kept happening until the attempt or wait budget ran out."""


# ---------------------------------------------------------------- retry policy


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 6
    base_delay_s: float = 1.0  # first backoff; doubles each attempt
    max_delay_s: float = 60.0  # cap of one computed backoff
    max_total_wait_s: float = 300.0  # give up rather than sleep more than this in total
    jitter: float = 0.5  # a backoff is scaled by uniform(1 - jitter, 1)

    def backoff(self, attempt: int, rng: random.Random) -> float:
        """Wait after failed attempt ``attempt`` (1-based), without any server hint."""
        delay = min(self.max_delay_s, self.base_delay_s * 2 ** (attempt - 1))
        return delay * (1 - self.jitter * rng.random())


def parse_retry_after(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms``, or ``Retry-After`` as seconds or HTTP date."""
    lowered = {k.lower(): v for k, v in headers.items()}
    if "retry-after-ms" in lowered:
        try:
            return max(0.0, float(lowered["retry-after-ms"]) / 1000)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


# ---------------------------------------------------------------- API key


class Secret:
    """An API key that never shows itself in repr/str."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def redact(self, text: str) -> str:
        return text.replace(self._value, REDACTED) if len(self._value) >= 4 else text

    def __repr__(self) -> str:
        return "Secret(***)"

    __str__ = __repr__


def is_loopback_url(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def api_key_from_env(env_name: str, required: bool) -> Secret | None:
    """The key in environment variable ``env_name``; MissingAPIKey when required and unset/empty."""
    if not _ENV_NAME.match(env_name):
        # never echo the value: it may be a key pasted where the variable name belongs
        raise MissingAPIKey(
            "api_key_env must be the NAME of an environment variable (letters, digits, '_'), not a key"
        )
    value = os.environ.get(env_name, "")
    if value:
        return Secret(value)
    if required:
        raise MissingAPIKey(f"environment variable {env_name} is not set; export your API key in it")
    return None


# ---------------------------------------------------------------- shared HTTP client


class HTTPChatModel(abc.ABC):
    """The retry/limit/redaction loop; subclasses define the endpoint, headers and wire format."""

    provider = "http"
    default_base_url = ""
    default_key_env = ""

    def __init__(
        self,
        model: str,
        base_url: str = "",
        api_key_env: str = "",
        limiter: AsyncLimiter | None = None,
        retry: RetryPolicy | None = None,
        timeout_s: float = 300.0,
        max_tokens: int | None = None,
        require_key: bool | None = None,
        extra_body: Mapping[str, Any] | None = None,
        seed: int | None = None,
    ) -> None:
        self.name = model
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        self.api_key_env = api_key_env or self.default_key_env
        required = not is_loopback_url(self.base_url) if require_key is None else require_key
        self._key = api_key_from_env(self.api_key_env, required)
        self.limiter = limiter
        self.retry = retry or RetryPolicy()
        self.max_tokens = max_tokens
        self.extra_body = dict(extra_body or {})
        self._rng = random.Random(seed)
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout_s, connect=min(10.0, timeout_s)),
            # keep a connection per in-flight item alive (httpx keeps 20 by default; batches run more)
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=256),
        )

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}(model={self.name!r}, base_url={self.base_url!r}, key_env={self.api_key_env!r})"

    @property
    @abc.abstractmethod
    def url(self) -> str:
        """The endpoint requests are POSTed to."""

    @abc.abstractmethod
    def _headers(self, key: str | None) -> dict[str, str]:
        """Request headers carrying ``key`` (None: no auth header)."""

    @abc.abstractmethod
    def _payload(self, messages: Sequence[Message]) -> dict[str, Any]:
        """The JSON request body for ``messages``."""

    @abc.abstractmethod
    def _parse(self, body: Any) -> tuple[str, int, int]:
        """(text, input tokens, output tokens) from a decoded 2xx body; KeyError/TypeError if malformed."""

    def redact(self, text: str) -> str:
        return self._key.redact(text) if self._key else text

    async def aclose(self) -> None:
        await self._client.aclose()

    async def complete(self, messages: Sequence[Message]) -> ModelReply:
        """One chat call with retries; raises a ProviderError subclass with a redacted message."""
        payload = {**self._payload(messages), **self.extra_body}
        headers = self._headers(self._key.reveal() if self._key else None)
        policy = self.retry
        start = time.monotonic()
        waited = 0.0
        status: int | None = None
        last = ""
        for attempt in range(1, policy.max_attempts + 1):
            hint: float | None = None
            try:
                if self.limiter is not None:
                    await self.limiter.acquire()
                resp = await self._client.post(self.url, json=payload, headers=headers)
            except httpx.TimeoutException as exc:
                status, last = None, f"timed out ({type(exc).__name__})"
            except httpx.TransportError as exc:
                status, last = None, f"connection failed ({type(exc).__name__}: {self.redact(str(exc))})"
            except httpx.HTTPError as exc:  # e.g. undecodable content: retrying will not help
                raise ProviderError(
                    f"{self.provider} {self.url}: request failed "
                    f"({type(exc).__name__}: {self.redact(str(exc))})",
                    None,
                    attempt,
                ) from None
            else:
                status = resp.status_code
                if 200 <= status < 300:
                    text, n_in, n_out = self._decode(resp, attempt)
                    return ModelReply(
                        self.redact(text), n_in, n_out, time.monotonic() - start, status, attempt, waited
                    )
                detail = self._error_detail(resp)
                if status not in RETRYABLE_STATUS:
                    raise ProviderHTTPError(
                        f"{self.provider} {self.url}: HTTP {status} (not retryable): {detail}",
                        status,
                        attempt,
                    )
                last = f"HTTP {status}: {detail}"
                hint = parse_retry_after(resp.headers)
            if attempt == policy.max_attempts:
                break
            # like the official SDKs: a positive server hint is used as given (+<=10% jitter against
            # herds of clients retrying together); without one, exponential backoff
            wait = policy.backoff(attempt, self._rng) if not hint else hint * (1 + 0.1 * self._rng.random())
            if waited + wait > policy.max_total_wait_s:
                raise RetriesExhausted(
                    f"{self.provider} {self.url}: giving up after {attempt} attempts: waiting "
                    f"{wait:.1f}s more would exceed the {policy.max_total_wait_s:g}s retry budget; "
                    f"last error: {last}",
                    status,
                    attempt,
                )
            _LOG.warning(
                "%s %s: %s; retry %d/%d in %.2fs",
                self.provider, self.url, last, attempt + 1, policy.max_attempts, wait,
            )  # fmt: skip
            await asyncio.sleep(wait)
            waited += wait
        raise RetriesExhausted(
            f"{self.provider} {self.url}: failed after {policy.max_attempts} attempts "
            f"({waited:.1f}s waiting); last error: {last}",
            status,
            policy.max_attempts,
        )

    def _decode(self, resp: httpx.Response, attempt: int) -> tuple[str, int, int]:
        try:
            body = resp.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise MalformedResponse(
                f"{self.provider} {self.url}: HTTP {resp.status_code} body is not valid JSON: "
                f"{self.redact(resp.text[:200])!r}",
                resp.status_code,
                attempt,
            ) from None
        try:
            text, n_in, n_out = self._parse(body)
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise MalformedResponse(
                f"{self.provider} {self.url}: HTTP {resp.status_code} JSON lacks the expected reply "
                f"({type(exc).__name__}: {self.redact(str(exc))}); "
                f"body starts {self.redact(resp.text[:200])!r}",
                resp.status_code,
                attempt,
            ) from None
        return text, n_in, n_out

    def _error_detail(self, resp: httpx.Response) -> str:
        """The server's error message (``error.message`` when JSON), shortened and redacted."""
        text = resp.text
        try:
            err = resp.json().get("error")
            if isinstance(err, dict) and err.get("message"):
                text = str(err["message"])
            elif isinstance(err, str):
                text = err
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
            pass
        return self.redact(text[:300]) or "(empty body)"


def _usage(body: Mapping[str, Any], in_key: str, out_key: str) -> tuple[int, int]:
    usage = body.get("usage") or {}
    return int(usage.get(in_key) or 0), int(usage.get(out_key) or 0)


class OpenAIChatModel(HTTPChatModel):
    """``POST {base_url}/chat/completions``: OpenAI, and local servers (vLLM, Ollama) via ``base_url``."""

    provider = "openai"
    default_base_url = "https://api.openai.com/v1"
    default_key_env = "OPENAI_API_KEY"

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def _headers(self, key: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _payload(self, messages: Sequence[Message]) -> dict[str, Any]:
        wire = []
        for m in messages:
            if m.role != "user":
                wire.append({"role": m.role, "content": m.text})
                continue
            content: list[dict[str, Any]] = []
            for p in m.parts:
                if isinstance(p, TextPart):
                    content.append({"type": "text", "text": p.text})
                else:
                    url = f"data:{p.media_type};base64,{p.data_b64}"
                    content.append({"type": "image_url", "image_url": {"url": url}})
            wire.append({"role": "user", "content": content})
        payload: dict[str, Any] = {"model": self.name, "messages": wire}
        if self.max_tokens is not None:
            payload["max_completion_tokens"] = self.max_tokens
        return payload

    def _parse(self, body: Any) -> tuple[str, int, int]:
        message = body["choices"][0]["message"]
        content = message.get("content")
        if isinstance(content, list):  # some servers return content parts
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        if content is None:
            content = message.get("refusal") or ""
        if not isinstance(content, str):
            raise TypeError(f"choices[0].message.content is {type(content).__name__}, not text")
        return (content, *_usage(body, "prompt_tokens", "completion_tokens"))


class AnthropicChatModel(HTTPChatModel):
    """``POST {base_url}/v1/messages`` with ``x-api-key`` and ``anthropic-version``."""

    provider = "anthropic"
    default_base_url = "https://api.anthropic.com"
    default_key_env = "ANTHROPIC_API_KEY"
    api_version = "2023-06-01"
    default_max_tokens = 4096  # Anthropic requires max_tokens

    @property
    def url(self) -> str:
        return (
            f"{self.base_url}/messages" if self.base_url.endswith("/v1") else f"{self.base_url}/v1/messages"
        )

    def _headers(self, key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": self.api_version}
        if key:
            headers["x-api-key"] = key
        return headers

    def _payload(self, messages: Sequence[Message]) -> dict[str, Any]:
        system = "\n\n".join(m.text for m in messages if m.role == "system")
        wire = []
        for m in messages:
            if m.role == "system":
                continue
            content: list[dict[str, Any]] = []
            for p in m.parts:
                if isinstance(p, TextPart):
                    content.append({"type": "text", "text": p.text})
                else:
                    source = {"type": "base64", "media_type": p.media_type, "data": p.data_b64}
                    content.append({"type": "image", "source": source})
            wire.append({"role": m.role, "content": content})
        payload: dict[str, Any] = {
            "model": self.name,
            "max_tokens": self.max_tokens or self.default_max_tokens,
            "messages": wire,
        }
        if system:
            payload["system"] = system
        return payload

    def _parse(self, body: Any) -> tuple[str, int, int]:
        blocks = body["content"]
        if not isinstance(blocks, list):
            raise TypeError(f"content is {type(blocks).__name__}, not a list of blocks")
        text = "".join(
            str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text"
        )
        return (text, *_usage(body, "input_tokens", "output_tokens"))


PROVIDERS: dict[str, type[HTTPChatModel]] = {"openai": OpenAIChatModel, "anthropic": AnthropicChatModel}


def make_chat_model(provider: str, model: str, **kwargs: Any) -> HTTPChatModel:
    """``provider`` is "openai" (any OpenAI-compatible server) or "anthropic"; kwargs go to the class."""
    if provider not in PROVIDERS:
        raise ValueError(f"unknown provider {provider!r}; choose one of {sorted(PROVIDERS)}")
    if not model:
        raise ValueError(f"provider {provider!r} needs a model name")
    return PROVIDERS[provider](model, **kwargs)
