"""Every environment variable read in giant_assets is documented in docs/environment.md."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NAME = r"[A-Z][A-Z0-9_]*"
READS = [
    re.compile(rf"os\.environ\.get\(\s*\"({NAME})\""),
    re.compile(rf"os\.getenv\(\s*\"({NAME})\""),
    re.compile(rf"os\.environ\[\"({NAME})\"\]"),
    re.compile(rf"\benv\(\s*\"({NAME})\""),  # core.settings env(...)
    re.compile(rf"^\s*[A-Z0-9_]*_ENV\s*(?::\s*str\s*)?=\s*\"({NAME})\"", re.M),  # a variable's name constant
    re.compile(rf"default_key_env\s*=\s*\"({NAME})\""),  # a provider's key variable
]


def read_variables() -> set[str]:
    names: set[str] = set()
    for path in (REPO / "giant_assets").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for pattern in READS:
            names |= set(pattern.findall(text))
    return names


def test_every_variable_read_is_documented() -> None:
    page = (REPO / "docs" / "environment.md").read_text(encoding="utf-8")
    names = read_variables()
    assert {"GIANT_AZURE_AUTH", "GIANT_DATA_DIR", "AZURE_OPENAI_API_KEY"} <= names  # the grep finds reads
    missing = sorted(n for n in names if f"`{n}`" not in page)
    assert not missing, f"read in giant_assets, not in docs/environment.md: {missing}"
