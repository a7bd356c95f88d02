"""Google's Application Default Credentials (ADC) for the Vertex AI providers (Claude and Gemini): the
chain ``google-auth`` walks (``GOOGLE_APPLICATION_CREDENTIALS``: a service-account or authorized-user
JSON; ``gcloud auth application-default login``; the metadata server), never stored. Each secret the
credentials hold (the access token they fetch, an authorized user's refresh token and client secret)
is remembered by ``core.secrets``, so every stored text is scrubbed of it; a private key is scrubbed by
its PEM shape."""

from __future__ import annotations

from typing import Any

from giant_assets.agents.providers.errors import MissingAPIKey
from giant_assets.core.secrets import remember

GOOGLE_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


def google_credentials(provider: str) -> tuple[Any, str | None]:
    """ADC and their project (MissingAPIKey naming ``provider`` when there are none)."""
    try:
        import google.auth
        from google.auth.exceptions import DefaultCredentialsError
    except ImportError:
        raise MissingAPIKey(f"provider {provider!r} needs google-auth: pip install google-auth") from None
    try:
        credentials, project = google.auth.default(scopes=[GOOGLE_SCOPE])
    except DefaultCredentialsError as exc:
        raise MissingAPIKey(
            f"provider {provider!r}: no Google credentials ({exc}); run `gcloud auth application-default "
            "login` or set GOOGLE_APPLICATION_CREDENTIALS"
        ) from None
    remember_credentials(credentials)
    return credentials, project


def remember_credentials(credentials: Any) -> None:
    """Remember the secrets ``credentials`` hold now (call again after a refresh: a new access token)."""
    for name in ("token", "refresh_token", "client_secret"):
        value = getattr(credentials, name, None)
        if isinstance(value, str) and value.strip():
            remember(value)
