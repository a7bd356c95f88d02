"""Build an agent from run settings; the config hash names the result set it produces."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd
from aiolimiter import AsyncLimiter

from giant_assets.agents.base import Agent

AGENT_NAMES = ("random", "majority", "replay", "giant")
PRICES_ENV = "GIANT_PRICES"  # optional JSON/YAML file overriding the USD price table
PROMPT_PROTOCOL_VERSION = "1"  # bump when the agent-side prompting changes results


@dataclass(frozen=True)
class AgentSettings:
    """Everything that decides what an agent answers (and nothing that only decides how fast)."""

    agent: str = "random"
    model: str = ""
    provider: str = "openai"
    base_url: str = ""
    api_key_env: str = ""
    max_steps: int = 20
    seed: int = 0
    replay_path: str = ""

    def config_hash(self) -> str:
        """Stable 12-hex id of the result set; the API key's env var name is not part of it."""
        fields = asdict(self)
        fields.pop("api_key_env")
        fields["protocol"] = PROMPT_PROTOCOL_VERSION
        blob = json.dumps(fields, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:12]


def save_settings(settings: AgentSettings, path: Path) -> None:
    """Record the settings of a result set beside its journals (no secrets: only the key's env var name)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(settings) | {"config_hash": settings.config_hash()}, indent=2))


def make_agent(settings: AgentSettings, truth: pd.DataFrame, limiter: AsyncLimiter) -> Agent:
    """Construct the configured agent. ``truth`` (benchmark_name, truth_label) feeds the majority baseline."""
    from giant_assets.agents import offline

    if settings.agent == "random":
        return offline.RandomAgent(seed=settings.seed)
    if settings.agent == "majority":
        return offline.MajorityAgent.from_truth(truth)
    if settings.agent == "replay":
        if not settings.replay_path:
            raise ValueError("agent 'replay' needs replay_path (a CSV/JSONL/Parquet of recorded predictions)")
        return offline.ReplayAgent(settings.replay_path)
    if settings.agent == "giant":
        return make_giant_agent(settings, limiter)
    raise ValueError(f"unknown agent {settings.agent!r}; choose one of {AGENT_NAMES}")


def make_giant_agent(settings: AgentSettings, limiter: AsyncLimiter) -> Agent:
    """The GIANT navigator over the configured provider; prices may be overridden via ``GIANT_PRICES``."""
    from giant_assets.agents.giant import GiantAgent
    from giant_assets.agents.pricing import load_price_table
    from giant_assets.agents.providers import AnthropicChatModel, OpenAIChatModel

    if not settings.model:
        raise ValueError("agent 'giant' needs a model name (run config 'model' or GIANT_MODEL)")
    providers = {"openai": OpenAIChatModel, "anthropic": AnthropicChatModel}
    if settings.provider not in providers:
        raise ValueError(f"unknown provider {settings.provider!r}; choose one of {sorted(providers)}")
    chat = providers[settings.provider](
        model=settings.model, base_url=settings.base_url, api_key_env=settings.api_key_env, limiter=limiter
    )
    prices = load_price_table(os.environ.get(PRICES_ENV) or None)
    return GiantAgent(chat, max_steps=settings.max_steps, prices=prices)
