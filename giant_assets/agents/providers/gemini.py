"""Google Gemini (``provider: gemini``) through the ``google-genai`` SDK's async client
(``client.aio.models.generate_content``), which posts to ``{base_url}/v1beta/models/{model}:generateContent``
with the key (``GEMINI_API_KEY``) in ``x-goog-api-key``; ``base_url`` goes to the SDK's
``http_options`` (a loopback server in the tests). SDK retries stay off: ``retry.py`` is the only loop.

Through Vertex AI (a ``region``): ``genai.Client(vertexai=True, project, location)`` with Google's
Application Default Credentials (``google_auth``), posting to ``{base_url}/v1beta1/projects/{project}/
locations/{region}/publishers/google/models/{model}:generateContent`` (the SDK's route and default API
version for Vertex) with ``Authorization: Bearer <access token>``; the same body and reply.

- Images go as ``inline_data`` parts; ``slide_zoom`` is a function declaration (its JSON schema as
  ``parameters_json_schema``, automatic function calling off); a tool result is a ``function_response``
  part, its crop image following in the same user turn.
- The model's parts go back verbatim on the next call (``replay``), thought signatures included, as
  Gemini requires with function calling and thinking.
- ``thinking_budget`` goes as ``thinking_config.thinking_budget`` (thought summaries asked for);
  ``api_contracts.gemini_thinking_range`` holds the budgets each model takes.
- A prompt blocked by Gemini's safety system (``prompt_feedback.block_reason``) or an answer stopped by
  it (``finish_reason`` SAFETY, PROHIBITED_CONTENT, ...) raises ``ContentFiltered``: recorded as such,
  never as the model's answer.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

import pydantic
from google import genai
from google.genai import errors, types

from giant_assets.agents.providers.base import SDKChatModel
from giant_assets.agents.providers.errors import (
    ContentFiltered,
    MalformedResponse,
    MissingAPIKey,
    ProviderError,
    UnsafeEndpoint,
)
from giant_assets.agents.providers.google_auth import google_credentials, remember_credentials
from giant_assets.agents.providers.messages import (
    ImagePart,
    Message,
    ModelReply,
    Part,
    TextPart,
    ToolCall,
    ToolSpec,
    Usage,
)
from giant_assets.agents.providers.retry import Failure, parse_retry_after
from giant_assets.core.endpoints import cloud_names_problem
from giant_assets.core.secrets import redact_secrets
from giant_assets.experiments.spec import vertex_root

MADE_UP_ID = "gemini-call-"  # a call without an id (the Gemini API may omit them) gets one of ours
VERTEX_API_VERSION = "v1beta1"  # google-genai's default for Vertex AI (v1beta for the Gemini API)
SAFETY_STOPS = frozenset({"SAFETY", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII", "IMAGE_SAFETY", "MODEL_ARMOR"})


class GeminiChatModel(SDKChatModel):
    provider = "gemini"
    api = "gemini"
    default_base_url = "https://generativelanguage.googleapis.com"
    default_key_env = "GEMINI_API_KEY"
    sdk = genai

    def __init__(
        self,
        model: str,
        *,
        thinking_budget: int | None = None,
        region: str = "",
        project: str = "",
        **kwargs: Any,
    ) -> None:
        self.thinking_budget = thinking_budget
        self.region = region  # set: Vertex AI in this location
        self.project = project
        self._credentials: Any = None
        if region:
            if problem := cloud_names_problem(self.provider, region, project):
                raise UnsafeEndpoint(problem)
            kwargs.setdefault("require_key", False)  # Google's credential chain, not an API key
            kwargs["base_url"] = kwargs.get("base_url") or vertex_root(region)
        super().__init__(model, **kwargs)

    def __repr__(self) -> str:
        where = f", region={self.region!r}" if self.region else ""
        return f"{type(self).__name__}(model={self.name!r}, base_url={self.base_url!r}{where})"

    @property
    def url(self) -> str:
        if not self.region:
            return f"{self.base_url}/v1beta/models/{self.name}:generateContent"
        where = f"projects/{self.project or '(from credentials)'}/locations/{self.region}"
        model = f"publishers/google/models/{self.name}"
        return f"{self.base_url}/{VERTEX_API_VERSION}/{where}/{model}:generateContent"

    def _make_client(self, key: str) -> genai.Client:
        timeout = int(self.timeout_s * 1000)
        if not self.region:
            options = types.HttpOptions(base_url=self.base_url, api_version="v1beta", timeout=timeout)
            return genai.Client(api_key=key, http_options=options)
        self._credentials, project = google_credentials(self.provider)
        self.project = self.project or project or ""
        if not self.project:
            raise MissingAPIKey("provider 'gemini' on Vertex AI: set 'project' (the credentials name none)")
        if problem := cloud_names_problem(self.provider, None, self.project):  # the credentials' project
            raise UnsafeEndpoint(problem)
        options = types.HttpOptions(base_url=self.base_url, api_version=VERTEX_API_VERSION, timeout=timeout)
        return genai.Client(
            vertexai=True,
            credentials=self._credentials,
            project=self.project,
            location=self.region,
            http_options=options,
        )

    def _credentialed(self) -> bool:
        return self._key is not None or bool(self.region)  # the key, or Google's OAuth token

    def redact(self, text: str) -> str:
        if self.region:  # every credential the chain gave, and any of a known shape
            return redact_secrets(text)
        return super().redact(text)

    def _auth_override(self) -> dict[str, Any]:
        return {}

    async def aclose(self) -> None:
        await self._client.aio.aclose()

    def _body(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], cache_key: str | None
    ) -> dict[str, Any]:
        config = types.GenerateContentConfig(
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
            max_output_tokens=self.max_tokens,
        )
        system = "\n\n".join(m.text for m in messages if m.role == "system")
        if system:
            config.system_instruction = system
        if tools:
            declarations = [
                types.FunctionDeclaration(
                    name=t.name, description=t.description, parameters_json_schema=t.parameters
                )
                for t in tools
            ]
            config.tools = [types.Tool(function_declarations=declarations)]
        if self.thinking_budget is not None:
            config.thinking_config = types.ThinkingConfig(
                thinking_budget=self.thinking_budget, include_thoughts=bool(self.thinking_budget) or None
            )
        return {"contents": to_contents(messages), "config": config}

    async def _send(self, body: dict[str, Any], headers: dict[str, Any]) -> Any:
        try:
            return await self._client.aio.models.generate_content(
                model=self.name, contents=body["contents"], config=body["config"]
            )
        finally:  # Vertex AI: the token the credentials hold now (the SDK refreshes it when expired)
            if self._credentials is not None:
                remember_credentials(self._credentials)

    def _stored(self, response: Any) -> dict[str, Any]:
        return json.loads(self.redact(json.dumps(response.model_dump(mode="json", exclude_none=True))))

    def _revive(self, data: dict[str, Any]) -> Any:
        return types.GenerateContentResponse.model_validate(data)

    def _reply(self, response: Any) -> ModelReply:
        where = f"{self.provider} {self.url}"
        feedback = response.prompt_feedback
        if feedback is not None and feedback.block_reason is not None:
            raise ContentFiltered(
                f"{where}: Gemini's safety system blocked the prompt ({_name(feedback.block_reason)})"
            )
        u = response.usage_metadata
        thought_tokens = (u.thoughts_token_count or 0) if u else 0
        usage = Usage(
            input_tokens=u.prompt_token_count or 0,
            output_tokens=(u.candidates_token_count or 0) + thought_tokens,  # thinking is billed as output
            cached_input_tokens=u.cached_content_token_count or 0,
            reasoning_tokens=thought_tokens,
        ) if u else Usage()  # fmt: skip
        if not response.candidates:  # an empty reply, as on every wire (ModelReply)
            return ModelReply("", (), usage)
        candidate = response.candidates[0]
        stop = _name(candidate.finish_reason)
        parts = (candidate.content.parts if candidate.content else None) or []
        if stop in SAFETY_STOPS:
            raise ContentFiltered(f"{where}: Gemini's safety system stopped the answer ({stop})", 200)
        texts = [p.text for p in parts if p.text and not p.thought]
        thoughts = [p.text for p in parts if p.text and p.thought]
        calls = tuple(_call(p.function_call, n) for n, p in enumerate(parts) if p.function_call is not None)
        replay = tuple(p.model_dump(mode="json", exclude_none=True) for p in parts)
        return ModelReply("".join(texts), calls, usage, reasoning="\n".join(thoughts), replay=replay)

    def _classify(self, exc: BaseException) -> Failure | ProviderError | None:
        if isinstance(exc, errors.APIError):
            headers = dict(getattr(exc.response, "headers", None) or {})
            message = self.redact(f"{exc.status or ''} {exc.message or ''}".strip() or str(exc))[:300]
            return Failure(message, exc.code, parse_retry_after(headers))
        name = type(exc).__name__
        if "Timeout" in name:
            return Failure(f"timed out ({name})")
        if any(c.__name__ in ("TransportError", "ConnectError", "NetworkError") for c in type(exc).__mro__):
            return Failure(f"connection failed ({name}: {self.redact(str(exc))})")
        if isinstance(exc, pydantic.ValidationError | json.JSONDecodeError):
            return MalformedResponse(
                f"{self.provider} {self.url}: the body is not valid JSON of the expected shape "
                f"({name}: {self.redact(str(exc))[:300]})",
                200,
            )
        return None


def _call(call: types.FunctionCall, n: int) -> ToolCall:
    """A neutral tool call (Gemini API calls may come without an id: one is made up)."""
    raw = json.dumps(call.args or {})
    return ToolCall(call.id or f"{MADE_UP_ID}{n}", call.name or "", _args(call.args), raw)


def _name(value: Any) -> str:
    return str(getattr(value, "name", value))


def _args(value: Any) -> dict[str, Any] | None:
    return dict(value) if isinstance(value, dict) else None


def to_contents(messages: Sequence[Message]) -> list[types.Content]:
    """Neutral messages as Gemini contents: ``user`` and ``model`` turns; tool results (their images
    after them) open the next user turn, consecutive user content merges into one turn."""
    wire: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # call id -> function name (a function_response names its function)
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "assistant":
            for c in m.tool_calls:
                names[c.id] = c.name
            parts = [types.Part.model_validate_json(json.dumps(p)) for p in m.replay] or [
                *([types.Part(text=m.text)] if m.text else []),
                *(types.Part(function_call=types.FunctionCall(name=c.name, args=c.arguments or {}))
                  for c in m.tool_calls),
            ]  # fmt: skip
            wire.append({"role": "model", "parts": parts})
            continue
        if m.role == "tool":
            texts = "\n".join(p.text for p in m.parts if isinstance(p, TextPart))
            response = types.FunctionResponse(name=names.get(m.call_id, ""), response={"result": texts})
            if not m.call_id.startswith(MADE_UP_ID):  # an id Gemini gave goes back
                response.id = m.call_id
            parts = [
                types.Part(function_response=response),
                *_parts([p for p in m.parts if isinstance(p, ImagePart)]),
            ]
        else:
            parts = _parts(m.parts)
        if wire and wire[-1]["role"] == "user":
            wire[-1]["parts"].extend(parts)
        else:
            wire.append({"role": "user", "parts": parts})
    return [types.Content(role=t["role"], parts=t["parts"]) for t in wire]


def _parts(parts: Sequence[Part]) -> list[types.Part]:
    out: list[types.Part] = []
    for p in parts:
        if isinstance(p, TextPart):
            out.append(types.Part(text=p.text))
        elif isinstance(p, ImagePart):
            blob = types.Blob(mime_type=p.media_type, data=base64.b64decode(p.data_b64))
            out.append(types.Part(inline_data=blob))
    return out
