"""The declared experiments' config hashes are pinned: a hash names the journals of a result set, so a
change of ``config_hash`` (or of what it hashes) orphans every journal and every call would be paid
again. A deliberate change (a protocol version bump) updates GOLDEN in the same commit."""

from __future__ import annotations

from pathlib import Path

import pytest

from giant_assets.experiments.declared import load_experiments

EXPERIMENTS_YAML = Path(__file__).resolve().parents[2] / "experiments.yaml"
GOLDEN = {
    "claude-giant": "9b07477e562e",
    "demo-giant": "4714e25bc879",
    "demo-patch": "9aa39ab27043",
    "demo-thumbnail": "3b59563215cd",
    "gpt5-giant": "7cfea0eb6a44",
    "gpt5-giant-x5": "7cfea0eb6a44",  # runs_per_item is not hashed: x5 reuses x1's run 0
    "gpt5-patch": "0cd8566aa25e",
    "gpt5-random-patch": "9e095adc2ab8",
    "gpt5-thumbnail": "a5d510a93e35",
    "gpt5-thumbnail-1000": "53b13c55fbbb",
    "gpt5-thumbnail-2000": "8aa383f2c805",
    "gpt5-thumbnail-250": "b9e118ac7d0d",
    "gpt5-thumbnail-3000": "545ca3875e65",
    "gpt5-thumbnail-4000": "c02228cf09d2",
    "gpt5-thumbnail-500": "9bbabb9edce9",
    "majority": "ac0c694ef5f1",
    "ollama-qwen3vl-giant": "f745f45fe385",
    "random": "42d2ed1dfc49",
    "vllm-qwen3vl-giant": "d5239fbd065d",
}


def test_declared_experiments_keep_their_config_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)  # an endpoint set there is hashed (as base_url)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    declared = load_experiments(EXPERIMENTS_YAML)
    now = {name: declared[name].config_hash() for name in GOLDEN if name in declared}
    assert sorted(set(GOLDEN) - set(now)) == [], "a pinned experiment is no longer declared"
    changed = {name: f"{GOLDEN[name]} -> {h}" for name, h in now.items() if h != GOLDEN[name]}
    assert changed == {}, (
        "config_hash changed for declared experiments: their journals would be orphaned and every call "
        "paid again. If intended (a protocol version bump), update GOLDEN"
    )
