"""A GIANT batch in its own process, for tests that kill it.

``python -m tests.support.giant_batch_child SPEC.json`` runs ``run_batch`` with the GIANT agent on the
Anthropic wire (no per-run cache key: the runs of an item send identical requests) against
``spec["base_url"]`` over ``spec["items"]``, journalling to ``spec["journal"]`` (prices from
``GIANT_PRICES``)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from giant_assets.agents.giant import GiantAgent
from giant_assets.agents.pricing import load_price_table
from giant_assets.agents.providers import AnthropicChatModel, RetryPolicy
from giant_assets.core.settings import PRICES_ENV, env
from giant_assets.runs.journal import Journal
from giant_assets.runs.runner import BatchSettings, run_batch


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    model = AnthropicChatModel(
        spec["model"], base_url=spec["base_url"], api_key_env="GIANT_TEST_KEY",
        retry=RetryPolicy(max_attempts=1),
    )  # fmt: skip
    agent = GiantAgent(model, prices=load_price_table(env(PRICES_ENV) or None), image_size=500, max_steps=6)
    settings = BatchSettings(**spec.get("settings", {}))

    async def go() -> None:
        try:
            out = await run_batch(
                agent,
                spec["items"],
                config_hash="h",
                journal=Journal(Path(spec["journal"])),
                settings=settings,
            )
        finally:
            await agent.aclose()
        print(json.dumps({"executed": out.executed, "cost_usd_new": out.cost_usd_new,
                          "billed_usd": out.billed_usd, "replayed": out.replayed_calls}))  # fmt: skip

    asyncio.run(go())


if __name__ == "__main__":
    main(sys.argv[1])
