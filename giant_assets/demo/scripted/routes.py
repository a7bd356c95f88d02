"""Where each provider posts a model request, and what its published API reference requires there:
the scripted server answers a request at a provider's route only when it carries what that provider
would demand (else 400 with the reason, as the provider would refuse it).

- OpenAI / OpenAI-compatible / OpenRouter: ``[/v1|/api/v1]/responses``, ``.../chat/completions``;
- Azure OpenAI: ``/openai/responses`` and ``/openai/deployments/{deployment}/chat/completions``, both
  with the ``api-version`` query parameter;
- Anthropic: ``/v1/messages``; Bedrock: ``/model/{modelId}/invoke`` (body without ``model``, with
  ``anthropic_version: bedrock-2023-05-31``; signed with SigV4 or a Bedrock API key as a bearer token);
  Vertex AI: ``/v1/projects/{p}/locations/{r}/publishers/anthropic/models/{m}:rawPredict`` (body
  without ``model``, ``anthropic_version: vertex-2023-10-16``, an OAuth bearer token);
- Gemini: ``/v1beta/models/{model}:generateContent`` (the key in ``x-goog-api-key``); Gemini on Vertex AI:
  ``/{v1|v1beta1}/projects/{p}/locations/{r}/publishers/google/models/{m}:generateContent`` (Vertex's
  ``projects.locations.publishers.models.generateContent``, https://cloud.google.com/vertex-ai/generative-ai/
  docs/reference/rest-rpc), an OAuth bearer token and no API key.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# (pattern, wire, provider)
ROUTES: list[tuple[re.Pattern[str], str, str]] = [
    (re.compile(r"^(/v1|/api/v1)?/responses$"), "responses", "openai"),
    (re.compile(r"^(/v1|/api/v1)?/chat/completions$"), "chat", "openai"),
    (re.compile(r"^/v1/messages$"), "messages", "anthropic"),
    (re.compile(r"^/openai/responses$"), "responses", "azure"),
    (re.compile(r"^/openai/deployments/(?P<deployment>[^/]+)/chat/completions$"), "chat", "azure"),
    (re.compile(r"^/model/(?P<model>[^/]+)/invoke$"), "messages", "bedrock"),
    (
        re.compile(
            r"^/v1/projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)/publishers/anthropic/models/"
            r"(?P<model>[^/:]+):rawPredict$"
        ),
        "messages",
        "vertex",
    ),
    (re.compile(r"^/v1beta/models/(?P<model>[^/:]+):generateContent$"), "gemini", "gemini"),
    (
        re.compile(
            r"^/(v1|v1beta1)/projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)/publishers/google/"
            r"models/(?P<model>[^/:]+):generateContent$"
        ),
        "gemini",
        "vertex-gemini",
    ),
]
ANTHROPIC_VERSIONS = {"bedrock": "bedrock-2023-05-31", "vertex": "vertex-2023-10-16"}


def route(path: str) -> tuple[str, str, dict[str, str]]:
    """(wire, provider, path parameters) of a request path; ("", "", {}) when no provider posts there."""
    for pattern, wire, provider in ROUTES:
        found = pattern.match(path)
        if found:
            return wire, provider, {k: v for k, v in found.groupdict().items() if v}
    return "", "", {}


def refusal(path: str, query: Mapping[str, str], headers: Mapping[str, Any], body: Any) -> str | None:
    """Why the provider at ``path`` would refuse this request (its documented requirements); None: none."""
    _, provider, _ = route(path)
    body = body if isinstance(body, dict) else {}
    if provider == "azure" and not query.get("api-version"):
        return "Missing required query parameter: api-version"
    if provider in ANTHROPIC_VERSIONS:
        if "model" in body:
            return f"{provider}: the model goes in the path, not the body"
        if body.get("anthropic_version") != ANTHROPIC_VERSIONS[provider]:
            return f"{provider}: anthropic_version must be {ANTHROPIC_VERSIONS[provider]}"
    auth = str(headers.get("authorization") or "")
    if provider == "bedrock":
        signed = auth.startswith("AWS4-HMAC-SHA256 Credential=") and headers.get("x-amz-date")
        if not (signed or auth.startswith("Bearer ")):
            return "bedrock: the request is neither signed (SigV4) nor carries a Bedrock API key"
    if provider == "vertex" and not auth.startswith("Bearer "):
        return "vertex: no OAuth bearer token"
    if provider == "gemini" and not (headers.get("x-goog-api-key") or query.get("key")):
        return "gemini: no API key (x-goog-api-key)"
    if provider == "vertex-gemini" and not auth.startswith("Bearer "):
        return "vertex-gemini: no OAuth bearer token"
    return None
