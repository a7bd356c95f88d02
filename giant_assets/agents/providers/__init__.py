"""Model providers over the official SDKs: one module per wire format, one retry policy, keys.

- ``messages``: provider-neutral messages, tools, tool calls, replies (``ChatModel`` protocol)
- ``openai_responses`` / ``openai_chat`` / ``anthropic``: the three wire formats
- ``azure`` / ``openrouter`` / ``anthropic_clouds`` (Bedrock, Vertex AI) / ``gemini``: the cloud
  providers (docs/cloud-providers.md); ``ContentFiltered``: a safety system's block, never an answer
- ``retry``: the only retry loop (SDK retries off), ``keys``: key by env var name and redaction
- ``factory.make_chat_model(experiment, limiter)``: chooses by ``experiment.resolved_api``
"""

from giant_assets.agents.providers.errors import (
    BadCABundle,
    ContentFiltered,
    MalformedResponse,
    MissingAPIKey,
    ProviderError,
    ProviderHTTPError,
    RetriesExhausted,
    UnsafeEndpoint,
)
from giant_assets.agents.providers.factory import make_chat_model, model_class
from giant_assets.agents.providers.keys import api_key_from_env
from giant_assets.agents.providers.messages import (
    ChatModel,
    ImagePart,
    Message,
    ModelReply,
    TextPart,
    ToolCall,
    ToolSpec,
    Usage,
)
from giant_assets.agents.providers.retry import RetryPolicy, parse_retry_after
from giant_assets.core.secrets import REDACTED, Secret, is_loopback_url

# the client classes load their SDK (openai, anthropic) on first use, not when this package is imported
_CLIENTS = {"OpenAIResponsesModel": "responses", "OpenAIChatModel": "chat", "AnthropicChatModel": "messages"}


def __getattr__(name: str) -> type:
    if name in _CLIENTS:
        return model_class(_CLIENTS[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "REDACTED",
    "AnthropicChatModel",
    "ChatModel",
    "ContentFiltered",
    "ImagePart",
    "MalformedResponse",
    "Message",
    "BadCABundle",
    "MissingAPIKey",
    "ModelReply",
    "OpenAIChatModel",
    "OpenAIResponsesModel",
    "ProviderError",
    "ProviderHTTPError",
    "RetriesExhausted",
    "RetryPolicy",
    "Secret",
    "TextPart",
    "ToolCall",
    "ToolSpec",
    "UnsafeEndpoint",
    "Usage",
    "api_key_from_env",
    "is_loopback_url",
    "make_chat_model",
    "parse_retry_after",
]
