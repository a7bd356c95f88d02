"""Key handling: whitespace stripped on reading, every form and long prefix redacted, short keys whole."""

from __future__ import annotations

import pytest

from giant_assets.agents.providers.keys import api_key_from_env
from giant_assets.core.secrets import REDACTED, Secret, redact_secrets

KEY = "sk-proj-Zq81kLmN0pQrStUv-wxYz_0123456789"


def test_a_key_read_with_a_newline_is_stripped_and_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEYS_TEST_KEY", f"  {KEY}\n")
    secret = api_key_from_env("KEYS_TEST_KEY", required=True)
    assert secret is not None and secret.reveal() == KEY
    assert redact_secrets(f"header b'Bearer {KEY}\\n' refused") == f"header b'Bearer {REDACTED}\\n' refused"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"Bearer {KEY}", f"Bearer {REDACTED}"),
        (f"{{'auth': '{KEY}'}}", f"{{'auth': '{REDACTED}'}}"),
        (f'{{"auth": "{KEY}"}}', f'{{"auth": "{REDACTED}"}}'),
        (f"{(KEY + chr(10)).encode()!r}", f"b'{REDACTED}\\n'"),
        (
            f"Incorrect API key provided: {KEY[:12]}****6789.",
            f"Incorrect API key provided: {REDACTED}****6789.",
        ),
        (f"{KEY[:20]}xyz and {KEY}{KEY}", f"{REDACTED}xyz and {REDACTED}{REDACTED}"),
        (f"{KEY[:11]}... is too short to tell", f"{KEY[:11]}... is too short to tell"),  # 11 < 12
    ],
)
def test_every_form_and_prefix_of_12_or_more_is_redacted(text: str, expected: str) -> None:
    assert Secret(KEY).redact(text) == expected


def test_a_short_key_is_redacted_only_whole() -> None:
    secret = Secret("abcd1234")
    assert secret.redact("x abcd1234 y abcd12 z") == f"x {REDACTED} y abcd12 z"


def test_keys_sharing_a_prefix_are_each_redacted_whole() -> None:
    """Google access tokens share their first characters ("ya29.a0A..."), and a refreshed one is
    remembered after the first: a later token must not lose only the shared prefix to the earlier one's
    prefix rule, leaving its tail (most of the secret) in the text."""
    from giant_assets.core.secrets import remember

    first, second = "sharedprefix-0123456789-first-key", "sharedprefix-0123456789-second-key"
    remember(first)
    remember(second)
    assert redact_secrets(f"a {second} b {first} c") == f"a {REDACTED} b {REDACTED} c"
