"""One TLS context per process for the providers' HTTP clients.

The OpenAI and Anthropic SDKs build a TLS context for every client they create, reading the whole CA
bundle each time (~55 ms of CPU; a cell builds a client per model per agent). Here it is built once per
process, by the SDKs' own HTTP library with its defaults (the CA bundle it ships, or ``SSL_CERT_FILE`` /
``SSL_CERT_DIR`` when set), and again only when one of those variables changes.
"""

from __future__ import annotations

import os
import ssl
from functools import cache
from types import ModuleType
from typing import Any

import httpx2

from giant_assets.agents.providers.errors import BadCABundle
from giant_assets.core.settings import CA_DIR_ENV, CA_FILE_ENV

CA_ENV = (CA_FILE_ENV, CA_DIR_ENV)  # what httpx2's default context reads


@cache
def _context(ca: tuple[str | None, ...]) -> ssl.SSLContext:
    return httpx2.create_ssl_context()  # reads CA_ENV itself: ``ca`` is their value, the cache key


def tls_context() -> ssl.SSLContext:
    """The TLS context an SDK client would build now, built once per value of the CA variables;
    BadCABundle naming the variable when what it names holds no readable certificates."""
    ca = tuple(os.environ.get(name) for name in CA_ENV)
    try:
        return _context(ca)
    except (OSError, ssl.SSLError) as exc:
        used = next((f"{name}={value!r}" for name, value in zip(CA_ENV, ca, strict=True) if value), None)
        raise BadCABundle(  # the first set variable is the one read (httpx2's order)
            f"{used or 'the CA bundle'}: no certificates can be read there ({exc.strerror or exc}); "
            "point it at a PEM file (or folder) of certificate authorities, or unset it"
        ) from None


def http_client(sdk: ModuleType) -> Any:
    """An HTTP client with the SDK's own defaults (timeout, connection limits, redirects) on the shared
    TLS context; the SDK client closes it with itself."""
    return sdk.DefaultAsyncHttpxClient(verify=tls_context())
