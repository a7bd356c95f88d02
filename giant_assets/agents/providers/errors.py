"""Errors of a model call; every message is redacted of the API key before it is raised."""

from __future__ import annotations


class ProviderError(RuntimeError):
    """A model call failed; ``status`` is the last HTTP status (None for transport failures)."""

    error_kind: str | None = None  # the run's error kind when this ends it (None: agent_error)

    def __init__(self, message: str, status: int | None = None, attempts: int = 0) -> None:
        super().__init__(message)
        self.status = status
        self.attempts = attempts


class MissingAPIKey(ProviderError):
    """The configured environment variable holds no API key."""


class UnsafeEndpoint(ProviderError):
    """A credential would go where it must not (plain http off loopback, a region or project that is no
    name of the provider's): refused before anything is sent."""


class BadCABundle(ProviderError):
    """SSL_CERT_FILE or SSL_CERT_DIR names no readable certificates: no TLS client can be built."""


class ProviderHTTPError(ProviderError):
    """A non-retryable HTTP error (4xx other than 408/409/425/429)."""


class MalformedResponse(ProviderError):
    """The server answered 2xx with a body that is not the expected reply."""


class RetriesExhausted(ProviderError):
    """Retryable failures kept happening until the attempt or wait budget ran out."""


class RequestNotSent(ProviderError):
    """The request would break the provider's documented limits: refused before it was sent (no cost)."""


class ContentFiltered(ProviderError):
    """The provider's safety system blocked the prompt or the answer (Azure's content filter, Gemini's
    safety blocks): the run ends with error kind ``content_filtered``, never with it as an answer."""

    error_kind = "content_filtered"
