"""API keys: read from an environment variable by NAME only, never shown, redacted from every text."""

from __future__ import annotations

import ipaddress
import os
import re
from urllib.parse import urlsplit

from giant_assets.agents.providers.errors import MissingAPIKey

REDACTED = "[REDACTED]"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Secret:
    """An API key that never shows itself in repr/str."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def redact(self, text: str) -> str:
        return text.replace(self._value, REDACTED) if len(self._value) >= 4 else text

    def __repr__(self) -> str:
        return "Secret(***)"

    __str__ = __repr__


def is_loopback_url(url: str) -> bool:
    """True for http(s)://localhost, 127.0.0.0/8 and [::1] base URLs (a local server needs no key)."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def api_key_from_env(env_name: str, required: bool) -> Secret | None:
    """The key in environment variable ``env_name``; MissingAPIKey when required and unset/empty."""
    if not _ENV_NAME.match(env_name):
        # never echo the value: it may be a key pasted where the variable name belongs
        raise MissingAPIKey(
            "api_key_env must be the NAME of an environment variable (letters, digits, '_'), not a key"
        )
    value = os.environ.get(env_name, "")
    if value:
        return Secret(value)
    if required:
        raise MissingAPIKey(f"environment variable {env_name} is not set; export your API key in it")
    return None
