"""Azure OpenAI (``provider: azure``) through ``openai.AsyncAzureOpenAI``, as the official GIANT code
reaches its GPT models: the resource's ``azure_endpoint``, an ``api-version`` query on every request
(default ``2025-03-01-preview``, the official code's), the key in the ``api-key`` header (from
``AZURE_OPENAI_API_KEY``) or a Microsoft Entra ID token (below). The request names the *deployment*;
prices and request rules go by the model's OpenAI name (``model``). Responses go to
``{endpoint}/openai/responses``, Chat Completions to
``{endpoint}/openai/deployments/{deployment}/chat/completions`` (the SDK's routing).

Azure's content filter answers either a 400 with ``error.code`` ``content_filter`` (the prompt was
blocked) or a reply whose ``finish_reason`` is ``content_filter`` / whose Responses output is
``incomplete`` for ``content_filter`` (the answer was blocked): both raise ``ContentFiltered``, so the
run is recorded with error kind ``content_filtered``, never with the blocked text as its answer.

Entra ID (keyless): where ``AZURE_OPENAI_API_KEY`` is not set and the endpoint is not on loopback, or
wherever ``GIANT_AZURE_AUTH=entra``, requests carry ``Authorization: Bearer <token>`` and no ``api-key``;
the token comes from ``azure-identity``'s ``DefaultAzureCredential`` (environment service principal,
workload or managed identity, ``az login``, ...) for the scope ``https://cognitiveservices.azure.com/
.default``, as Microsoft's samples do (``pip install 'giant-assets[azure]'``). Each token is remembered
as a secret, so it is redacted from every stored text like a key. ``GIANT_AZURE_AUTH=key`` insists on the
key. Without either, ``MissingAPIKey`` names both ways.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import openai

from giant_assets.agents.providers.errors import ContentFiltered, MissingAPIKey, ProviderError
from giant_assets.agents.providers.messages import Message, ModelReply, ToolSpec
from giant_assets.agents.providers.openai_chat import OpenAIChatModel
from giant_assets.agents.providers.openai_responses import OpenAIResponsesModel
from giant_assets.agents.providers.retry import Failure
from giant_assets.agents.providers.tls import http_client
from giant_assets.core.secrets import is_loopback_url, redact_secrets, remember
from giant_assets.experiments.spec import AZURE_API_VERSION

ENTRA_SCOPE = "https://cognitiveservices.azure.com/.default"
AUTH_ENV = "GIANT_AZURE_AUTH"  # "entra": an Entra ID token; "key": the API key; unset: as found
BLOCKED_ANSWER = "Azure's content filter blocked the answer"
FILTER_CODES = frozenset({"content_filter", "ResponsibleAIPolicyViolation"})


class _Azure:
    """What both Azure wires share (a mixin before the OpenAI wire class)."""

    provider = "azure"
    default_key_env = "AZURE_OPENAI_API_KEY"
    endpoint_field = "azure_endpoint"
    name: str
    base_url: str
    timeout_s: float
    redact: Any

    def __init__(
        self, model: str, *, deployment: str = "", api_version: str | None = None, **kwargs: Any
    ) -> None:
        self.deployment = deployment or model
        self.api_version = api_version or AZURE_API_VERSION
        self.entra = _uses_entra(
            kwargs.get("base_url", ""), kwargs.get("api_key_env") or self.default_key_env
        )
        if self.entra:
            kwargs["require_key"] = False
        super().__init__(model, **kwargs)  # type: ignore[call-arg]

    def _credentialed(self) -> bool:
        return True  # the key, or an Entra ID token

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model={self.name!r}, deployment={self.deployment!r}, "
            f"endpoint={self.base_url!r}, api_version={self.api_version!r})"
        )

    @property
    def url(self) -> str:
        return f"{self.base_url}/openai{self._route()}?api-version={self.api_version}"

    def _route(self) -> str:
        raise NotImplementedError

    def _make_client(self, key: str) -> openai.AsyncAzureOpenAI:
        auth: dict[str, Any] = {"api_key": key}
        if self.entra:  # the token wins over any key the SDK would read from the environment
            auth = {"azure_ad_token_provider": entra_token_provider(f"{self.provider} {self.base_url}")}
        return openai.AsyncAzureOpenAI(
            azure_endpoint=self.base_url,
            api_version=self.api_version,
            max_retries=0,
            timeout=self.timeout_s,
            http_client=http_client(openai),
            **auth,
        )

    def _auth_override(self) -> dict[str, Any]:
        if self._key or self.entra:
            return {}
        return {"api-key": openai.Omit(), "Authorization": openai.Omit()}  # type: ignore[attr-defined]

    def redact(self, text: str) -> str:
        return redact_secrets(super().redact(text))  # type: ignore[misc]  # Entra ID tokens too

    def _request_options(self, headers: dict[str, Any]) -> dict[str, Any]:
        return {"headers": headers}

    def _body(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], cache_key: str | None
    ) -> dict[str, Any]:
        return super()._body(messages, tools, cache_key) | {"model": self.deployment}  # type: ignore[misc]

    def _classify(self, exc: BaseException) -> Failure | ProviderError | None:
        if isinstance(exc, openai.APIStatusError) and _filter_code(exc.body):
            where = f"{self.provider} {self.url}"
            return ContentFiltered(
                f"{where}: Azure's content filter blocked the prompt "
                f"({self.redact(_filter_detail(exc.body))})",
                exc.status_code,
            )
        return super()._classify(exc)  # type: ignore[misc]


class AzureResponsesModel(_Azure, OpenAIResponsesModel):
    def _route(self) -> str:
        return "/responses"

    def _reply(self, response: Any) -> ModelReply:
        details = getattr(response, "incomplete_details", None)
        if getattr(details, "reason", None) == "content_filter":
            raise ContentFiltered(f"{self.provider} {self.url}: {BLOCKED_ANSWER}", 200)
        return super()._reply(response)


class AzureChatModel(_Azure, OpenAIChatModel):
    def _route(self) -> str:
        return f"/deployments/{self.deployment}/chat/completions"

    def _reply(self, response: Any) -> ModelReply:
        choice = response.choices[0]
        if choice.finish_reason == "content_filter":
            raise ContentFiltered(f"{self.provider} {self.url}: {BLOCKED_ANSWER}", 200)
        return super()._reply(response)


def _uses_entra(base_url: str, key_env: str) -> bool:
    """Whether requests carry an Entra ID token instead of a key (module docstring)."""
    mode = os.environ.get(AUTH_ENV, "").strip().lower()
    if mode not in ("", "key", "entra"):
        raise ValueError(f"environment variable {AUTH_ENV} is 'entra' or 'key', not {mode!r}")
    if mode:
        return mode == "entra"
    return not os.environ.get(key_env, "").strip() and not is_loopback_url(base_url)


def entra_token_provider(where: str) -> Callable[[], Awaitable[str]]:
    """An async bearer-token provider from ``DefaultAzureCredential`` (its own cache: a token is asked
    for again only near its expiry), each token remembered as a secret; MissingAPIKey naming both ways
    to authenticate when azure-identity is missing or finds no credential."""
    try:
        from azure.identity import DefaultAzureCredential, get_bearer_token_provider
    except ImportError:
        raise MissingAPIKey(
            f"{where}: AZURE_OPENAI_API_KEY is not set and azure-identity (for a Microsoft Entra ID token) "
            "is not installed: export the key, or pip install 'giant-assets[azure]' and sign in"
        ) from None
    fetch = get_bearer_token_provider(DefaultAzureCredential(), ENTRA_SCOPE)

    async def token() -> str:
        try:
            value = await asyncio.to_thread(fetch)  # the credential chain blocks: off the event loop
        except Exception as exc:  # azure.core.exceptions.ClientAuthenticationError and its kin
            first = redact_secrets(str(exc)).strip().splitlines()[0][:300] if str(exc).strip() else ""
            raise MissingAPIKey(
                f"{where}: no Microsoft Entra ID token for {ENTRA_SCOPE} from DefaultAzureCredential "
                f"({type(exc).__name__}: {first}); sign in (az login, a managed identity, or "
                "AZURE_TENANT_ID/AZURE_CLIENT_ID/AZURE_CLIENT_SECRET), or export AZURE_OPENAI_API_KEY"
            ) from None
        remember(value)
        return value

    return token


def _filter_code(body: Any) -> bool:
    err = body.get("error", body) if isinstance(body, dict) else None
    if not isinstance(err, dict):
        return False
    inner = err.get("innererror") if isinstance(err.get("innererror"), dict) else {}
    return err.get("code") in FILTER_CODES or inner.get("code") in FILTER_CODES


def _filter_detail(body: dict[str, Any]) -> str:
    """Which categories Azure filtered (``innererror.content_filter_result``), else its message."""
    err = body.get("error", body)
    inner = err.get("innererror") if isinstance(err.get("innererror"), dict) else {}
    result = inner.get("content_filter_result") or {}
    hits = sorted(k for k, v in result.items() if isinstance(v, dict) and v.get("filtered"))
    return "filtered: " + ", ".join(hits) if hits else str(err.get("message", ""))[:300]
