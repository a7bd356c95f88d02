"""OpenRouter (``provider: openrouter``): an OpenAI-compatible gateway to many vendors' models,
through ``openai.AsyncOpenAI`` at ``https://openrouter.ai/api/v1`` with Chat Completions.

- Models are named ``vendor/model`` (``openai/gpt-5``, ``anthropic/claude-sonnet-4.5``); request
  rules and prices are looked up without the vendor (``api_contracts.vendor_model``, ``PriceTable``).
- The key comes from ``OPENROUTER_API_KEY``; every request carries OpenRouter's attribution header
  ``X-Title``.
- Reasoning goes as OpenRouter's unified ``reasoning: {"effort": ...}`` (it maps effort to each vendor's
  own option); the answer's limit as ``max_tokens``.
- A prompt flagged by the vendor's moderation (HTTP 403 with ``error.metadata.reasons``) or a reply
  ended for ``content_filter`` raise ``ContentFiltered``: recorded as such, never as an answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import openai

from giant_assets.agents.providers.errors import ContentFiltered, ProviderError
from giant_assets.agents.providers.messages import Message, ModelReply, ToolSpec
from giant_assets.agents.providers.openai_chat import OpenAIChatModel
from giant_assets.agents.providers.retry import Failure
from giant_assets.agents.providers.tls import http_client

HEADERS = {"X-Title": "giant-assets"}


class OpenRouterChatModel(OpenAIChatModel):
    provider = "openrouter"
    default_base_url = "https://openrouter.ai/api/v1"
    default_key_env = "OPENROUTER_API_KEY"
    max_tokens_field = "max_tokens"

    def _make_client(self, key: str) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            api_key=key,
            base_url=self.base_url,
            max_retries=0,
            timeout=self.timeout_s,
            default_headers=HEADERS,
            http_client=http_client(openai),
        )

    def _body(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], cache_key: str | None
    ) -> dict[str, Any]:
        body = super()._body(messages, tools, cache_key)
        effort = body.pop("reasoning_effort", None)
        if effort:
            body["reasoning"] = {"effort": effort}
        return body

    def _reply(self, response: Any) -> ModelReply:
        if response.choices[0].finish_reason == "content_filter":
            raise ContentFiltered(
                f"{self.provider} {self.url}: the vendor's content filter blocked the answer", 200
            )
        return super()._reply(response)

    def _classify(self, exc: BaseException) -> Failure | ProviderError | None:
        reasons = _moderation_reasons(exc)
        if reasons:
            flagged = ", ".join(map(str, reasons))
            return ContentFiltered(
                f"{self.provider} {self.url}: moderation flagged the prompt ({flagged})", 403
            )
        return super()._classify(exc)


def _moderation_reasons(exc: BaseException) -> list[Any] | None:
    """The moderation's reasons of a 403 (``error.metadata.reasons``), or None."""
    if not isinstance(exc, openai.APIStatusError) or exc.status_code != 403 or not isinstance(exc.body, dict):
        return None
    err = exc.body.get("error", exc.body)
    metadata = err.get("metadata") if isinstance(err, dict) else None
    reasons = metadata.get("reasons") if isinstance(metadata, dict) else None
    return reasons if isinstance(reasons, list) and reasons else None
