"""What the three wire formats share: key handling, the retry loop, sending, SDK error classification.

Each wire module builds its request body as plain JSON data under the wire's own field names, and
``_send`` posts it with the SDK's raw-request method (``client.post(path, cast_to=..., body=...)``, the
SDKs' documented way to make custom requests) rather than the typed ``create``. ``create`` would first
walk the body with the SDK's type-driven transform (``openai._utils._transform``), an identity on data
already in wire format that costs milliseconds of GIL-held CPU per request, as the images in it are
large base64 strings. Everything else is the SDK's own: headers and auth, the client's timeout, the
HTTP transport, the exception classes ``_classify`` maps, and the parsed response model (``cast_to``).
"""

from __future__ import annotations

import abc
import json
import random
import time
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pydantic

from giant_assets.agents.providers.errors import MalformedResponse, ProviderError, UnsafeEndpoint
from giant_assets.agents.providers.keys import api_key_from_env
from giant_assets.agents.providers.messages import Message, ModelReply, ToolSpec
from giant_assets.agents.providers.retry import Failure, RetryPolicy, parse_retry_after, with_retries
from giant_assets.core.endpoints import endpoint_problem
from giant_assets.core.secrets import Secret, is_loopback_url
from giant_assets.runs.ratelimit import RateLimiter
from giant_assets.runs.replies import current as current_replies
from giant_assets.runs.replies import request_digest

if TYPE_CHECKING:
    from giant_assets.agents.providers.batching import BatchRound

REPLAYED = "replayed from the reply store: sent by an earlier execution of this run, not paid again"
NO_KEY = "no-key-configured"  # placeholder the SDK insists on; its auth header is omitted on every call


class SDKChatModel(abc.ABC):
    """One model behind an official SDK client (``max_retries=0``: ``retry.py`` is the only loop)."""

    provider = ""
    api = ""
    endpoint = ""  # the path under base_url that requests are posted to
    default_base_url = ""
    default_key_env = ""
    endpoint_field = "base_url"  # the experiment field base_url comes from (named when it is refused)
    sdk: ModuleType  # the ``openai`` or ``anthropic`` package: its exception classes
    response_type: type  # the SDK's model of a reply, which the SDK parses the response body into

    def __init__(
        self,
        model: str,
        base_url: str = "",
        api_key_env: str = "",
        limiter: RateLimiter | None = None,
        retry: RetryPolicy | None = None,
        timeout_s: float = 600.0,  # the SDKs' default, as the official code has it
        max_tokens: int | None = None,
        require_key: bool | None = None,
        seed: int | None = None,
    ) -> None:
        if not model:
            raise ValueError(f"provider {self.provider!r} needs a model name")
        self.name = model
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        self.api_key_env = api_key_env or self.default_key_env
        required = not is_loopback_url(self.base_url) if require_key is None else require_key
        self._key: Secret | None = api_key_from_env(self.api_key_env, required)
        if self.base_url and self._credentialed() and (problem := endpoint_problem(self.base_url)):
            raise UnsafeEndpoint(f"provider {self.provider!r}: field {self.endpoint_field!r}: {problem}")
        self.limiter = limiter
        self.retry = retry or RetryPolicy()
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        self._rng = random.Random(seed)
        self._client = self._make_client(self._key.reveal() if self._key else NO_KEY)
        self.batch: BatchRound | None = None  # batch mode: requests go through provider batches
        self.prices: Any = None  # the price table (make_chat_model: the experiment's), else GIANT_PRICES

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}(model={self.name!r}, base_url={self.base_url!r}, key_env={self.api_key_env!r})"

    @property
    def url(self) -> str:
        return f"{self.base_url}{self.endpoint}"

    def _credentialed(self) -> bool:
        """Whether requests carry a credential (a key here; a cloud's token or signature in its class)."""
        return self._key is not None

    @abc.abstractmethod
    def _make_client(self, key: str) -> Any:
        """The SDK's async client, with ``max_retries=0``."""

    @abc.abstractmethod
    def _body(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], cache_key: str | None
    ) -> dict[str, Any]:
        """The request body: plain JSON data in the wire format, sent as it is."""

    def _prepare(self, messages: Sequence[Message]) -> tuple[Sequence[Message], tuple[str, ...]]:
        """The conversation as it may be sent under the provider's limits, and notes on what changed
        (recorded with the reply); raises ``RequestNotSent`` for what no change can fix."""
        return messages, ()

    def _request_options(self, headers: dict[str, Any]) -> dict[str, Any]:
        """The SDK's per-request options (``RequestOptions``): our extra headers."""
        return {"headers": headers}

    async def _send(self, body: dict[str, Any], headers: dict[str, Any]) -> Any:
        """One HTTP attempt: POST ``body`` to ``endpoint``; returns the SDK's parsed ``response_type``."""
        return await self._client.post(
            self.endpoint, cast_to=self.response_type, body=body, options=self._request_options(headers)
        )

    @abc.abstractmethod
    def _reply(self, response: Any) -> ModelReply:
        """The neutral reply from the SDK response (latency/attempts filled in by ``complete``)."""

    def _auth_override(self) -> dict[str, Any]:
        """Per-request headers: without a key, the SDK's placeholder auth header is omitted."""
        return {} if self._key else {"Authorization": self.sdk.Omit(), "X-Api-Key": self.sdk.Omit()}

    def redact(self, text: str) -> str:
        return self._key.redact(text) if self._key else text

    async def aclose(self) -> None:
        await self._client.close()

    async def complete(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (), cache_key: str | None = None
    ) -> ModelReply:
        """One model call with retries; raises a ProviderError subclass with a redacted message."""
        headers = self._auth_override()
        messages, notes = self._prepare(messages)
        body = self._body(messages, tools, cache_key)  # once: the SDKs do not change it
        # a run with a reply store (runs/replies.py) replays a reply it was sent before for free
        replies = current_replies() if self.batch is None else None
        slot = stored = None
        if replies is not None:
            digest = request_digest(body)
            slot = (digest, replies.occurrence(digest))
            stored = replies.lookup(*slot)
        if stored is not None:
            response = self._revive(stored["response"])
            attempts, waited, latency = 0, 0.0, 0.0
            notes += (REPLAYED,)
        else:
            response, attempts, waited, latency = await self._call(body, headers)
        try:
            reply = self._reply(response)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError, RecursionError) as exc:
            raise MalformedResponse(
                f"{self.provider} {self.url}: the reply lacks what was expected "
                f"({type(exc).__name__}: {self.redact(str(exc))})",
                200,
                attempts,
            ) from None
        if replies is not None and slot is not None and stored is None:  # kept before the agent sees it
            replies.record(*slot, self._stored(response), **self._accounting(reply.usage))
        if self.limiter is not None and stored is None:
            await self.limiter.record_tokens(reply.usage.total)
        return ModelReply(
            text=self.redact(reply.text),
            tool_calls=reply.tool_calls,
            usage=reply.usage,
            latency_s=latency,
            attempts=attempts,
            waited_s=waited,
            reasoning=self.redact(reply.reasoning),
            replay=reply.replay,
            notes=notes + reply.notes + self._notes(),
        )

    def _stored(self, response: Any) -> dict[str, Any]:
        """The SDK response as the JSON data it was parsed from (keys redacted), to replay it."""
        return json.loads(self.redact(json.dumps(response.to_dict(mode="json"))))

    def _revive(self, data: dict[str, Any]) -> Any:
        """The SDK response object of stored or batch-answered JSON data (``_stored``'s inverse)."""
        return self.sdk._models.construct_type(type_=self.response_type, value=data)

    def _accounting(self, usage: Any) -> dict[str, Any]:
        """A paid reply's tokens and cost (the experiment's prices, as the agents price their steps;
        NaN when the model has none)."""
        if self.prices is None:
            from giant_assets.agents.pricing import load_price_table
            from giant_assets.core.settings import PRICES_ENV, env

            self.prices = load_price_table(env(PRICES_ENV) or None)
        cost = self.prices.cost(
            self.name, usage.input_tokens, usage.output_tokens, usage.cached_input_tokens,
            usage.cache_write_tokens,
        )  # fmt: skip
        return {
            "model": self.name, "input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
            "cached_input_tokens": usage.cached_input_tokens, "cost_usd": cost.usd,
        }  # fmt: skip

    def _notes(self) -> tuple[str, ...]:
        """Notes on how this model's requests are sent now (e.g. an optional feature dropped)."""
        return ()

    async def _call(self, body: dict[str, Any], headers: dict[str, Any]) -> tuple[Any, int, float, float]:
        """``body`` sent with retries, or through the provider's batch API in batch mode: (SDK response,
        attempts, seconds waited, wall seconds)."""
        if self.batch is not None:
            started = time.monotonic()
            data = await self.batch.request(body)
            response = self._revive(data)
            return response, 1, 0.0, time.monotonic() - started
        return await with_retries(
            lambda: self._send(body, headers),
            self._classify,
            where=f"{self.provider} {self.url}",
            policy=self.retry,
            limiter=self.limiter,
            rng=self._rng,
        )

    def _classify(self, exc: BaseException) -> Failure | ProviderError | None:
        sdk = self.sdk
        where = f"{self.provider} {self.url}"
        if isinstance(exc, sdk.APIStatusError):
            hint = parse_retry_after(dict(exc.response.headers))
            return Failure(self.redact(_error_detail(exc)), exc.status_code, hint)
        if isinstance(exc, sdk.APITimeoutError):
            return Failure(f"timed out ({type(exc).__name__})")
        if isinstance(exc, sdk.APIConnectionError):
            cause = exc.__cause__ or exc
            return Failure(f"connection failed ({type(cause).__name__}: {self.redact(str(cause))})")
        if isinstance(exc, UnicodeDecodeError):  # a body in another encoding, or bytes cut mid-character
            return MalformedResponse(
                f"{where}: the body is not UTF-8 JSON ({exc.reason} at byte {exc.start}: "
                f"{self.redact(repr(exc.object[max(0, exc.start - 20) : exc.start + 20]))})",
                200,
            )
        if isinstance(
            exc,
            sdk.APIResponseValidationError | json.JSONDecodeError | pydantic.ValidationError | RecursionError,
        ):
            return MalformedResponse(
                f"{where}: the body is not valid JSON of the expected shape "
                f"({type(exc).__name__}: {self.redact(str(exc))[:300]})",
                200,
            )
        return None


def _error_detail(exc: Any) -> str:
    """The server's ``error.message`` when the body is JSON, else the SDK's message; shortened."""
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
        if isinstance(err, str):
            return err[:300]
    return (str(body) if body else str(exc.message) or "(empty body)")[:300]


def dump(item: Any) -> dict[str, Any]:
    """An SDK model object as the plain JSON dict to send back on the next call."""
    return item.model_dump(mode="json", exclude_none=True)
