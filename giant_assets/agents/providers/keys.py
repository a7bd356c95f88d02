"""API keys: read from an environment variable by NAME only, never shown, redacted from every text.

A key is stripped of surrounding whitespace when read (a secret read from a file keeps its newline,
which the HTTP library would refuse, quoting the whole header in its error), and remembered by
``core.secrets`` so that ``redact_secrets`` scrubs it from every text before it is stored.
"""

from __future__ import annotations

import os
import re

from giant_assets.agents.providers.errors import MissingAPIKey
from giant_assets.core.secrets import Secret, remember

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def api_key_from_env(env_name: str, required: bool) -> Secret | None:
    """The key in environment variable ``env_name``; MissingAPIKey when required and unset/empty."""
    if not _ENV_NAME.match(env_name):
        # never echo the value: it may be a key pasted where the variable name belongs
        raise MissingAPIKey(
            "api_key_env must be the NAME of an environment variable (letters, digits, '_'), not a key"
        )
    value = os.environ.get(env_name, "").strip()
    if value:
        return remember(value)
    if required:
        raise MissingAPIKey(f"environment variable {env_name} is not set; export your API key in it")
    return None
