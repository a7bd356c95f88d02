"""The scripted model: a real loopback HTTP server speaking three model wire formats (one module
each: ``responses``, ``chat``, ``messages``), with tool calls, reasoning and caching.

- ``POST /v1/responses`` (OpenAI Responses): function calls, reasoning items (with encrypted content
  when asked), ``usage.input_tokens_details.cached_tokens``;
- ``POST /v1/chat/completions`` (OpenAI Chat Completions, as vLLM/Ollama serve it): ``tool_calls``,
  ``usage.prompt_tokens_details.cached_tokens``;
- ``POST /v1/messages`` (Anthropic Messages): ``tool_use`` and ``thinking`` blocks,
  ``cache_read_input_tokens``/``cache_creation_input_tokens`` when the request marks ``cache_control``.
- the cloud providers' routes of these wires (Azure's deployments with ``api-version``, OpenRouter's
  ``/api/v1``, Bedrock's ``/model/{id}/invoke``, Vertex's ``:rawPredict``) and Gemini's
  ``/v1beta/models/{model}:generateContent`` (``gemini``), each refusing what its provider would
  (``routes``); ``POST /token`` hands out an OAuth token (a service-account key may point there).

Replies come from a script (consumed in order), then from a rule function of the request, e.g.
``demo_policy``, which navigates like a cautious model without any key: it crops the darkest region of
the overview it was sent (through the ``slide_zoom`` tool when one is offered, else as a free-JSON
action), then answers ``<report>..</report><response>{json}</response>`` in the benchmark's format:
the bundled sample's answer when the lesion fills enough of its last view to read, else a guess.
Input tokens follow the providers' image rules (``pricing.image_tokens``) plus 1 token per 4 characters
of text; a request whose leading turns were seen before reports them as cached. Every request is
recorded (headers, body, arrival time) so tests can check what the SDK really sent.

    with ScriptedModelServer(rule=demo_policy) as server:
        model = OpenAIResponsesModel("demo", base_url=server.openai_base_url)
"""

from giant_assets.demo.scripted.policy import DEMO_MODEL, demo_policy
from giant_assets.demo.scripted.recorded import RecordedRequest
from giant_assets.demo.scripted.replies import (
    TOOL_NAME,
    Reply,
    answer_reply,
    crop_reply,
    malformed,
    rate_limited,
    server_error,
    unauthorized_echo,
)
from giant_assets.demo.scripted.server import (
    IDENTITY_PATH,
    Rule,
    ScriptedModelServer,
    is_scripted_model,
    scripted_model_at,
    serve_demo_model,
)

__all__ = [
    "DEMO_MODEL", "IDENTITY_PATH", "TOOL_NAME", "RecordedRequest", "Reply", "Rule", "ScriptedModelServer",
    "answer_reply", "crop_reply", "demo_policy", "is_scripted_model", "malformed", "rate_limited",
    "scripted_model_at", "serve_demo_model", "server_error", "unauthorized_echo",
]  # fmt: skip
