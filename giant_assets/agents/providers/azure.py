"""Azure OpenAI (``provider: azure``) through ``openai.AsyncAzureOpenAI``, as the official GIANT code
reaches its GPT models: the resource's ``azure_endpoint``, an ``api-version`` query on every request
(default ``2025-03-01-preview``, the official code's), the key in the ``api-key`` header (from
``AZURE_OPENAI_API_KEY``). The request names the *deployment*; prices and request rules go by the
model's OpenAI name (``model``). Responses go to ``{endpoint}/openai/responses``, Chat Completions to
``{endpoint}/openai/deployments/{deployment}/chat/completions`` (the SDK's routing).

Azure's content filter answers either a 400 with ``error.code`` ``content_filter`` (the prompt was
blocked) or a reply whose ``finish_reason`` is ``content_filter`` / whose Responses output is
``incomplete`` for ``content_filter`` (the answer was blocked): both raise ``ContentFiltered``, so the
run is recorded with error kind ``content_filtered``, never with the blocked text as its answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import openai

from giant_assets.agents.providers.errors import ContentFiltered, ProviderError
from giant_assets.agents.providers.messages import Message, ModelReply, ToolSpec
from giant_assets.agents.providers.openai_chat import OpenAIChatModel
from giant_assets.agents.providers.openai_responses import OpenAIResponsesModel
from giant_assets.agents.providers.retry import Failure
from giant_assets.experiments.spec import AZURE_API_VERSION

BLOCKED_ANSWER = "Azure's content filter blocked the answer"
FILTER_CODES = frozenset({"content_filter", "ResponsibleAIPolicyViolation"})


class _Azure:
    """What both Azure wires share (a mixin before the OpenAI wire class)."""

    provider = "azure"
    default_key_env = "AZURE_OPENAI_API_KEY"
    name: str
    base_url: str
    timeout_s: float
    redact: Any

    def __init__(
        self, model: str, *, deployment: str = "", api_version: str | None = None, **kwargs: Any
    ) -> None:
        self.deployment = deployment or model
        self.api_version = api_version or AZURE_API_VERSION
        super().__init__(model, **kwargs)  # type: ignore[call-arg]

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
        return openai.AsyncAzureOpenAI(
            azure_endpoint=self.base_url,
            api_version=self.api_version,
            api_key=key,
            max_retries=0,
            timeout=self.timeout_s,
        )

    def _auth_override(self) -> dict[str, Any]:
        return {} if self._key else {"api-key": openai.Omit(), "Authorization": openai.Omit()}  # type: ignore[attr-defined]

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
