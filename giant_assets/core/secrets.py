"""Secrets in text: every API key (and cloud credential: AWS secret keys and session tokens, Google
access tokens) read in this process is remembered, so ``redact_secrets`` can scrub any
text before it is stored or shown: the key in any form it takes in a message (raw, after ``Bearer``,
quoted, in a ``repr`` or JSON string) and any prefix of it of ``MIN_PREFIX`` or more characters (a
server's "sk-proj-abc..."). Below every layer that stores text (the batch journal, the providers, the CLI).
"""

from __future__ import annotations

import ipaddress
import json
import re
from urllib.parse import urlsplit, urlunsplit

REDACTED = "[REDACTED]"
# credentials known by their shape, redacted even when this process never read them: AWS access key ids,
# SigV4 signatures, Google OAuth access tokens and API keys, OpenRouter keys, PEM private keys (a Google
# service-account key file's, raw or JSON-escaped)
SHAPES = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----(?s:.*?)-----END [A-Z ]*PRIVATE KEY-----"
    r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"
    r"|(?<=Signature=)[0-9a-f]{64}"
    r"|\bya29\.[0-9A-Za-z_.-]{16,}"
    r"|\bAIza[0-9A-Za-z_-]{35}"
    r"|\bsk-or-v1-[0-9a-f]{32,}"
)
MIN_PREFIX = 12  # a run of the key's first 12+ characters is redacted; shorter keys only whole
_KNOWN: dict[str, Secret] = {}  # every key read in this process, by value


class Secret:
    """An API key (surrounding whitespace stripped) that never shows itself in repr/str."""

    __slots__ = ("_forms", "_value")

    def __init__(self, value: str) -> None:
        self._value = value.strip()
        raw = self._value
        forms = {raw, repr(raw)[1:-1], json.dumps(raw)[1:-1], repr(raw.encode())[2:-1]}
        self._forms = sorted((f for f in forms if len(f) >= 4), key=len, reverse=True)

    def reveal(self) -> str:
        return self._value

    def redact(self, text: str) -> str:
        """``text`` with every form of the key, and every run of its first MIN_PREFIX+ characters, hidden."""
        for form in self._forms:
            text = _redact_prefixes(text, form)
        return text

    def redact_whole(self, text: str) -> str:
        """``text`` with every whole form of the key hidden (no prefix)."""
        for form in self._forms:
            text = text.replace(form, REDACTED)
        return text

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


_SECRET_PARAM = re.compile(r"key|token|secret|sig|pass|auth|credential", re.IGNORECASE)


def public_url(url: str) -> str:
    """``url`` as it may be stored: no user name or password, the values of query parameters that may
    carry a credential (``api-key=``, ``token=``, ...) and every key read in this process redacted."""
    if not url:
        return url
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]  # drop user:password@
    query = "&".join(
        f"{k}={REDACTED}" if _SECRET_PARAM.search(k) else f"{k}={v}" if sep else k
        for k, sep, v in (pair.partition("=") for pair in parts.query.split("&") if pair)
    )
    return redact_secrets(urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment)))


def remember(value: str) -> Secret:
    """The Secret for ``value`` (stripped), remembered so that every later text is scrubbed of it."""
    value = value.strip()
    return _KNOWN.setdefault(value, Secret(value))


def redact_secrets(text: str) -> str:
    """``text`` with every key read in this process redacted (see ``Secret.redact``), and every
    credential of a known shape (``SHAPES``: AWS key ids and signatures, Google tokens and keys)."""
    known = list(_KNOWN.values())
    for secret in known:  # whole keys first: keys sharing a prefix (Google's "ya29.a0A...") each go whole
        text = secret.redact_whole(text)
    for secret in known:
        text = secret.redact(text)
    return SHAPES.sub(REDACTED, text)


def _redact_prefixes(text: str, key: str) -> str:
    """Replace each occurrence of ``key``'s first ``min(len, MIN_PREFIX)`` characters, extended for as
    long as the text goes on matching the key, by REDACTED (a short key is replaced only whole)."""
    head = key[: min(len(key), MIN_PREFIX)]
    if head not in text:
        return text
    out: list[str] = []
    pos = 0
    while (start := text.find(head, pos)) != -1:
        end = start + len(head)
        while end - start < len(key) and end < len(text) and text[end] == key[end - start]:
            end += 1
        out.append(text[pos:start] + REDACTED)
        pos = end
    out.append(text[pos:])
    return "".join(out)
