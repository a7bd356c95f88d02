"""The declared experiments' config hashes are pinned: a hash names the journals of a result set, so a
change of ``config_hash`` (or of what it hashes) orphans every journal and every call would be paid
again. A deliberate change (a protocol version bump) updates GOLDEN in the same commit."""

from __future__ import annotations

from pathlib import Path

import pytest

from giant_assets.experiments.declared import load_experiments

EXPERIMENTS_YAML = Path(__file__).resolve().parents[2] / "experiments.yaml"
GOLDEN = {  # PROTOCOL_VERSION 4 (model agents; offline agents keep 3): the official request options
    "azure-gpt5-giant": "228bd00bb0c7",
    "bedrock-claude-giant": "02bc19072f05",
    "claude-giant": "98bfad2247db",
    "claude-path-review": "630e464a91b9",
    "demo-giant": "2189fd054c2e",
    "demo-patch": "7d1338e103c8",
    "demo-path-review": "79f1b8581010",
    "demo-thumbnail": "03f35119ac85",
    "gemini-giant": "c104292d84ca",
    "vertex-gemini-giant": "038ea2aae1e0",  # as gemini-giant, through Vertex AI (vertex_ai hashed)
    "gpt5-giant": "aa6f6150c0fb",
    "gpt5-giant-steps-1": "6f2803fa0571",
    "gpt5-giant-steps-10": "f96281258865",
    "gpt5-giant-steps-15": "431a658159f3",
    "gpt5-giant-steps-25": "03157ecf2642",
    "gpt5-giant-steps-5": "ba2c5a93a4e1",
    "gpt5-giant-x5": "aa6f6150c0fb",  # runs_per_item is not hashed: x5 reuses x1's run 0
    "gpt5-patch": "b55cfab886d4",
    "gpt5-path-review": "b82393405b90",
    "gpt5-random-patch": "8edd9d1904cb",
    "gpt5-thumbnail": "f2c763c73dde",
    "gpt5-thumbnail-1000": "91a04831f7c3",
    "gpt5-thumbnail-2000": "4f3843c731f6",
    "gpt5-thumbnail-250": "4faf6226ef03",
    "gpt5-thumbnail-3000": "672df120de9f",
    "gpt5-thumbnail-4000": "699b16177317",
    "gpt5-thumbnail-500": "b3e483c68765",
    "majority": "ac0c694ef5f1",
    "ollama-qwen3vl-giant": "28bfdf7aada3",
    "openrouter-gpt5-giant": "8f079a5064be",
    "random": "42d2ed1dfc49",
    "vertex-claude-giant": "0ccbe798bbd5",
    "vllm-qwen3vl-giant": "e462fd4eec3d",
}


def test_declared_experiments_keep_their_config_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)  # an endpoint set there is hashed (as base_url)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    declared = load_experiments(EXPERIMENTS_YAML)
    now = {name: declared[name].config_hash() for name in GOLDEN if name in declared}
    assert sorted(set(GOLDEN) - set(now)) == [], "a pinned experiment is no longer declared"
    assert sorted(set(declared) - set(GOLDEN)) == [], "a declared experiment is not pinned: add it to GOLDEN"
    changed = {name: f"{GOLDEN[name]} -> {h}" for name, h in now.items() if h != GOLDEN[name]}
    assert changed == {}, (
        "config_hash changed for declared experiments: their journals would be orphaned and every call "
        "paid again. If intended (a protocol version bump), update GOLDEN"
    )
