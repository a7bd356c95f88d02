"""Claude on Amazon Bedrock and Google Vertex AI (``provider: bedrock`` / ``vertex``): the Messages wire
of ``anthropic.AnthropicChatModel`` through the Anthropic SDK's ``AsyncAnthropicBedrock`` and
``AsyncAnthropicVertex`` clients. ``model`` stays the Anthropic name (request rules, prices); the route
takes the cloud's model id (``deployment``, default mapped by ``experiments.cloud_models``).

- Bedrock: ``POST {bedrock-runtime.REGION.amazonaws.com}/model/{modelId}/invoke``, the body without
  ``model`` (the SDK moves it) and with ``anthropic_version: bedrock-2023-05-31`` (set here: the
  installed SDK would send its own API date, which AWS's reference does not list), signed with SigV4
  from the standard AWS chain (environment, profile, SSO, instance role: whatever boto3 finds), or a
  Bedrock API key in ``AWS_BEARER_TOKEN_BEDROCK``. Needs ``boto3`` (``pip install giant-assets[aws]``).
- Vertex AI: ``POST {REGION-aiplatform.googleapis.com/v1}/projects/{project}/locations/{region}/
  publishers/anthropic/models/{modelId}:rawPredict`` with ``anthropic_version: vertex-2023-10-16`` and an
  OAuth token from Google's Application Default Credentials (``google-auth``; the project from
  ``project``, else the credentials').

Credentials are never stored: the secret parts the chains resolve (AWS secret key and session token,
Google access tokens) are remembered by ``core.secrets`` so every stored text is scrubbed of them.
"""

from __future__ import annotations

from typing import Any

import anthropic

from giant_assets.agents.providers.anthropic import AnthropicChatModel
from giant_assets.agents.providers.errors import MissingAPIKey, UnsafeEndpoint
from giant_assets.agents.providers.google_auth import google_credentials, remember_credentials
from giant_assets.agents.providers.tls import http_client
from giant_assets.core.endpoints import cloud_names_problem
from giant_assets.core.secrets import redact_secrets, remember


class _AnthropicCloud(AnthropicChatModel):
    """What both clouds share: the route's model id, the region, credentials from the cloud's chain."""

    default_base_url = ""  # the SDK's, from the region

    def __init__(
        self, model: str, *, deployment: str = "", region: str = "", project: str = "", **kwargs: Any
    ) -> None:
        if not region:
            raise ValueError(f"provider {self.provider!r} needs a region")
        if problem := cloud_names_problem(self.provider, region, project):
            raise UnsafeEndpoint(problem)
        self.deployment = deployment or model
        self.region = region
        kwargs.setdefault("require_key", False)  # the cloud's credential chain, not an API key
        super().__init__(model, **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.name!r}, id={self.deployment!r}, region={self.region!r})"

    anthropic_version = ""  # the cloud's documented body field (this SDK would send its own date)

    def _body(self, messages: Any, tools: Any, cache_key: str | None) -> dict[str, Any]:
        body = super()._body(messages, tools, cache_key)
        return body | {"model": self.deployment, "anthropic_version": self.anthropic_version}  # model: route

    def _credentialed(self) -> bool:
        return True  # a signature, a session token or an OAuth token on every request

    def _auth_override(self) -> dict[str, Any]:
        return {}  # the client signs every request itself

    def redact(self, text: str) -> str:
        return redact_secrets(text)  # every credential the chain gave, and any of a known shape


class BedrockChatModel(_AnthropicCloud):
    provider = "bedrock"
    anthropic_version = "bedrock-2023-05-31"
    default_key_env = "AWS_BEARER_TOKEN_BEDROCK"  # a Bedrock API key, when one is used instead of SigV4

    @property
    def url(self) -> str:
        base = self.base_url or f"https://bedrock-runtime.{self.region}.amazonaws.com"
        return f"{base}/model/{self.deployment}/invoke"

    def _make_client(self, key: str) -> anthropic.AsyncAnthropicBedrock:
        common = {
            "aws_region": self.region,
            "base_url": self.base_url or None,
            "max_retries": 0,
            "http_client": http_client(anthropic),
        }
        if self._key:
            return anthropic.AsyncAnthropicBedrock(api_key=key, timeout=self.timeout_s, **common)
        _remember_aws_credentials(self.region)
        return anthropic.AsyncAnthropicBedrock(timeout=self.timeout_s, **common)


class VertexChatModel(_AnthropicCloud):
    provider = "vertex"
    anthropic_version = "vertex-2023-10-16"
    default_key_env = "ANTHROPIC_VERTEX_ACCESS_TOKEN"  # an OAuth token, when one is given instead of ADC

    def __init__(self, model: str, *, project: str = "", **kwargs: Any) -> None:
        self.project = project
        super().__init__(model, project=project, **kwargs)

    @property
    def url(self) -> str:
        base = self.base_url or f"https://{self.region}-aiplatform.googleapis.com/v1"
        where = f"projects/{self.project or '(from credentials)'}/locations/{self.region}"
        return f"{base}/{where}/publishers/anthropic/models/{self.deployment}:rawPredict"

    def _make_client(self, key: str) -> anthropic.AsyncAnthropicVertex:
        common = {
            "region": self.region,
            "base_url": self.base_url or None,
            "max_retries": 0,
            "http_client": http_client(anthropic),
        }
        if self._key:
            if not self.project:
                raise MissingAPIKey("provider 'vertex' with an access token needs 'project'")
            return anthropic.AsyncAnthropicVertex(
                access_token=key, project_id=self.project, timeout=self.timeout_s, **common
            )
        credentials, project = google_credentials("vertex")
        self.project = self.project or project
        if not self.project:
            raise MissingAPIKey("provider 'vertex': set 'project' (the credentials name none)")
        if problem := cloud_names_problem(self.provider, None, self.project):  # the credentials' project
            raise UnsafeEndpoint(problem)
        return anthropic.AsyncAnthropicVertex(
            credentials=credentials, project_id=self.project, timeout=self.timeout_s, **common
        )

    async def _send(self, body: dict[str, Any], headers: dict[str, Any]) -> Any:
        try:
            return await super()._send(body, headers)
        finally:  # the token the credentials hold now (refreshed by the client when expired)
            remember_credentials(getattr(self._client, "credentials", None))


def _remember_aws_credentials(region: str) -> None:
    """Resolve the AWS chain once (MissingAPIKey when it yields nothing) and remember its secrets."""
    try:
        import boto3
    except ImportError:
        raise MissingAPIKey(
            "provider 'bedrock' signs requests with boto3: pip install 'giant-assets[aws]' (or boto3)"
        ) from None
    credentials = boto3.Session(region_name=region).get_credentials()
    if credentials is None:
        raise MissingAPIKey(
            "provider 'bedrock': no AWS credentials found (environment AWS_ACCESS_KEY_ID/"
            "AWS_SECRET_ACCESS_KEY, AWS_PROFILE, SSO or an instance role), nor AWS_BEARER_TOKEN_BEDROCK"
        )
    frozen = credentials.get_frozen_credentials()
    for secret in (frozen.secret_key, frozen.token):
        if secret:
            remember(secret)
