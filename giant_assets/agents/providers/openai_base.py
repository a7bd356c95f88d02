"""What the two OpenAI wire formats (Responses, Chat Completions) share: the client and the options."""

from __future__ import annotations

import json
import logging
from typing import Any

import openai

from giant_assets.agents.providers.base import SDKChatModel
from giant_assets.agents.providers.tls import http_client
from giant_assets.experiments.api_contracts import reasons, vendor_model

_LOG = logging.getLogger(__name__)


class OpenAIModel(SDKChatModel):
    """An ``openai.AsyncOpenAI`` client (retries ours: ``max_retries=0``) and the reasoning effort, sent
    only to a model that may take it (``api_contracts.reasons``: not gpt-4o, gpt-4.1, ...)."""

    provider = "openai"
    default_base_url = "https://api.openai.com/v1"
    default_key_env = "OPENAI_API_KEY"
    sdk = openai

    def __init__(self, model: str, *, reasoning_effort: str | None = None, **kwargs: Any) -> None:
        if reasoning_effort and reasons("openai", vendor_model(model)) is False:
            _LOG.info("%s takes no reasoning options: reasoning_effort %r not sent", model, reasoning_effort)
            reasoning_effort = None
        self.reasoning_effort = reasoning_effort
        super().__init__(model, **kwargs)

    def _make_client(self, key: str) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            api_key=key,
            base_url=self.base_url,
            max_retries=0,
            timeout=self.timeout_s,
            http_client=http_client(openai),
        )

    def _request_options(self, headers: dict[str, Any]) -> dict[str, Any]:
        # the security both wires' typed ``create`` asks for: the API key as a bearer token only
        # (``post``'s default would also admit an admin key from the environment)
        return {"headers": headers, "security": {"bearer_auth": True}}


def tool_arguments(raw: str) -> dict[str, Any] | None:
    """A tool call's JSON arguments as a dict; None when they are not a JSON object (or nest too deep)."""
    try:
        value = json.loads(raw or "{}")
    except (json.JSONDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
