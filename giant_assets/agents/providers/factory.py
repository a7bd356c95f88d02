"""``make_chat_model``: the provider an experiment names, by its wire format (``resolved_api``), or the
local-server preset (``local.LocalChatModel``) when the experiment names a ``server``."""

from __future__ import annotations

import importlib
from typing import Any

from giant_assets.agents.pricing import experiment_prices
from giant_assets.agents.providers.base import SDKChatModel
from giant_assets.agents.providers.retry import RetryPolicy
from giant_assets.experiments.spec import Experiment
from giant_assets.runs.ratelimit import RateLimiter

BASELINES = frozenset({"thumbnail", "patch"})  # one request per item (per patch): no prefix shared later
# api -> (module, class); imported on first use, so a run loads only the SDK it talks to
WIRE_FORMATS: dict[str, tuple[str, str]] = {
    "responses": ("giant_assets.agents.providers.openai_responses", "OpenAIResponsesModel"),
    "chat": ("giant_assets.agents.providers.openai_chat", "OpenAIChatModel"),
    "messages": ("giant_assets.agents.providers.anthropic", "AnthropicChatModel"),
}
# (provider, api) -> (module, class) of the providers that serve a wire format on their own terms
CLOUD_CLASSES: dict[tuple[str, str], tuple[str, str]] = {
    ("azure", "responses"): ("giant_assets.agents.providers.azure", "AzureResponsesModel"),
    ("azure", "chat"): ("giant_assets.agents.providers.azure", "AzureChatModel"),
    ("openrouter", "chat"): ("giant_assets.agents.providers.openrouter", "OpenRouterChatModel"),
    ("bedrock", "messages"): ("giant_assets.agents.providers.anthropic_clouds", "BedrockChatModel"),
    ("vertex", "messages"): ("giant_assets.agents.providers.anthropic_clouds", "VertexChatModel"),
    ("gemini", "gemini"): ("giant_assets.agents.providers.gemini", "GeminiChatModel"),
}


# the variable each client class reads its key from unless ``api_key_env`` names another, by the same
# keys: what `giant-experiments check` says without importing an SDK (a test compares it with the classes')
DEFAULT_KEY_ENVS: dict[tuple[str, str] | str, str] = {
    "responses": "OPENAI_API_KEY",
    "chat": "OPENAI_API_KEY",
    "messages": "ANTHROPIC_API_KEY",
    ("azure", "responses"): "AZURE_OPENAI_API_KEY",
    ("azure", "chat"): "AZURE_OPENAI_API_KEY",
    ("openrouter", "chat"): "OPENROUTER_API_KEY",
    ("bedrock", "messages"): "AWS_BEARER_TOKEN_BEDROCK",
    ("vertex", "messages"): "ANTHROPIC_VERTEX_ACCESS_TOKEN",
    ("gemini", "gemini"): "GEMINI_API_KEY",
}


def default_key_env(api: str, provider: str = "") -> str:
    """The variable :func:`model_class`'s class reads its key from by default (no SDK is imported)."""
    return DEFAULT_KEY_ENVS.get((provider, api)) or DEFAULT_KEY_ENVS[api]


def model_class(api: str, provider: str = "") -> type[SDKChatModel]:
    """The client class of a wire format (as ``provider`` serves it, when it has its own)."""
    module, name = CLOUD_CLASSES.get((provider, api)) or WIRE_FORMATS[api]
    return getattr(importlib.import_module(module), name)


def make_chat_model(experiment: Experiment, limiter: RateLimiter | None, **kwargs: Any) -> SDKChatModel:
    """The experiment's model client; ``kwargs`` (retry, timeout_s, max_tokens, ...) override the
    experiment's (``request_timeout_s``, ``request_attempts``, ``resolved_max_output_tokens``)."""
    api = experiment.resolved_api
    common: dict[str, Any] = {
        "base_url": experiment.resolved_base_url,
        "api_key_env": experiment.api_key_env,
        "limiter": limiter,
        "seed": experiment.seed,
        "timeout_s": experiment.request_timeout_s,
        "retry": RetryPolicy(max_attempts=experiment.request_attempts),
        "max_tokens": experiment.resolved_max_output_tokens,
    }
    if experiment.server:
        from giant_assets.agents.providers.local import LocalChatModel

        local = {
            "server": experiment.server,
            "max_images": experiment.server_image_limit,
            "send_detail": experiment.resolved_send_detail,
        }
        model = LocalChatModel(experiment.model, **(common | local | kwargs))
        model.prices = experiment_prices(experiment)
        return model
    if api in ("messages", "gemini"):
        common["thinking_budget"] = experiment.thinking_budget
    else:
        common["reasoning_effort"] = experiment.reasoning_effort
    if api == "messages":  # the baselines' one-request items: no cache mark, as officially, unless asked
        common["cache"] = experiment.agent not in BASELINES or experiment.baseline_cache
    if api == "responses":
        common["reasoning_summary"] = experiment.reasoning_summary
    common |= _cloud_settings(experiment)
    model = model_class(api, experiment.provider)(experiment.model, **(common | kwargs))
    model.prices = experiment_prices(experiment)  # what the reply store records each reply cost
    return model


def _cloud_settings(experiment: Experiment) -> dict[str, Any]:
    """The extra settings of a cloud provider's class (deployment, api-version, region, project)."""
    provider = experiment.provider
    if provider == "azure":
        return {"deployment": experiment.resolved_deployment, "api_version": experiment.resolved_api_version}
    if provider in ("bedrock", "vertex"):
        extra = {"deployment": experiment.resolved_deployment, "region": experiment.region}
        return extra | ({"project": experiment.project} if provider == "vertex" else {})
    if experiment.vertex_ai:  # Gemini through Vertex AI
        return {"region": experiment.region, "project": experiment.project}
    return {}
