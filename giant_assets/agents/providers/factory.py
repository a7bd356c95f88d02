"""``make_chat_model``: the provider an experiment names, by its wire format (``resolved_api``)."""

from __future__ import annotations

from typing import Any

from giant_assets.agents.providers.anthropic import AnthropicChatModel
from giant_assets.agents.providers.base import SDKChatModel
from giant_assets.agents.providers.openai_chat import OpenAIChatModel
from giant_assets.agents.providers.openai_responses import OpenAIResponsesModel
from giant_assets.batch.ratelimit import RateLimiter
from giant_assets.experiments.spec import Experiment

WIRE_FORMATS: dict[str, type[SDKChatModel]] = {
    "responses": OpenAIResponsesModel,
    "chat": OpenAIChatModel,
    "messages": AnthropicChatModel,
}


def make_chat_model(experiment: Experiment, limiter: RateLimiter | None, **kwargs: Any) -> SDKChatModel:
    """The experiment's model client; ``kwargs`` (retry, timeout_s, max_tokens, ...) go to the class."""
    api = experiment.resolved_api
    common: dict[str, Any] = {
        "base_url": experiment.base_url,
        "api_key_env": experiment.api_key_env,
        "limiter": limiter,
        "seed": experiment.seed,
    }
    if api == "messages":
        common["thinking_budget"] = experiment.thinking_budget
    else:
        common["reasoning_effort"] = experiment.reasoning_effort
    return WIRE_FORMATS[api](experiment.model, **common, **kwargs)
