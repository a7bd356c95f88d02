"""Build the agent an experiment names; its ``config_hash`` names the result set it produces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from giant_assets.experiments.plugins import is_plugin
from giant_assets.experiments.spec import NAVIGATING, Experiment
from giant_assets.runs.agent_api import Agent
from giant_assets.runs.ratelimit import RateLimiter

if TYPE_CHECKING:
    import pandas as pd


def save_settings(experiment: Experiment, path: Path) -> None:
    """Record a result set's answer-deciding settings beside its journals (no secrets), and the price
    its calls are billed at with its source (``prices``: experiment, file or built-in, read when)."""
    from giant_assets.agents.pricing import experiment_prices, price_record

    path.parent.mkdir(parents=True, exist_ok=True)
    doc = experiment.answer_settings() | {
        "config_hash": experiment.config_hash(),
        "endpoint": experiment.endpoint,
        "prices": price_record(experiment, experiment_prices(experiment)),
    }
    path.write_text(json.dumps(doc, indent=2, default=str))


def make_agent(experiment: Experiment, truth: pd.DataFrame | None, limiter: RateLimiter) -> Agent:
    """Construct the experiment's agent. ``truth`` (benchmark_name, truth_label) feeds the majority floor;
    the other agents need none (pandas is imported only by the offline agents: ~0.6 CPU-s of giant-run)."""
    if experiment.agent in ("random", "majority", "replay"):
        from giant_assets.agents import offline

        if experiment.agent == "random":
            return offline.RandomAgent(seed=experiment.seed)
        if experiment.agent == "majority":
            if truth is None:
                raise ValueError("the majority agent needs the items' truth labels")
            return offline.MajorityAgent.from_truth(truth)
        return offline.ReplayAgent(experiment.replay_path)
    if experiment.agent in NAVIGATING:
        return make_giant_agent(experiment, limiter)
    if experiment.agent in ("thumbnail", "patch"):
        from giant_assets.agents.baselines import make_baseline_agent

        return make_baseline_agent(experiment, limiter)
    if is_plugin(experiment.agent):
        from giant_assets.agents.plugin_agent import make_plugin_agent

        return make_plugin_agent(experiment, limiter)
    raise NotImplementedError(f"agent {experiment.agent!r} is declared but not built yet")


def make_giant_agent(experiment: Experiment, limiter: RateLimiter) -> Agent:
    """The GIANT navigator over the experiment's provider and wire format (``random_patch``: the same loop
    with random tissue regions, or with ``random_patch_tool: slide_zoom`` random crop locations;
    ``path_review``: the same loop asked for the path review instead of the question); prices
    come from ``pricing.experiment_prices`` (the experiment, ``GIANT_PRICES``, the built-in table)."""
    from giant_assets.agents.giant import GiantAgent
    from giant_assets.agents.path_review import PathReviewAgent
    from giant_assets.agents.pricing import experiment_prices
    from giant_assets.agents.providers import make_chat_model
    from giant_assets.experiments.prompts import resolve_prompts

    prices = experiment_prices(experiment)
    random_patch = experiment.agent == "random_patch"
    agent = PathReviewAgent if experiment.agent == "path_review" else GiantAgent
    return agent(
        make_chat_model(experiment, limiter),
        max_steps=experiment.max_steps,
        max_attempts=experiment.max_attempts,
        image_size=experiment.resolved_image_size,
        protocol=experiment.protocol,
        max_images_in_context=experiment.resolved_max_images_in_context,
        prune_tool_images=experiment.prunes_tool_images,
        prompts=resolve_prompts(experiment.prompt_file, experiment.prompt_path),
        note_tool=experiment.note_tool,
        serve_calls=experiment.resolved_serve_calls,
        # a batch round may take hours: like item_timeout_s, no limit in batch mode
        attempt_timeout_s=None if experiment.batch else experiment.attempt_timeout_s,
        prices=prices,
        image_quality=experiment.image_quality,
        image_read=experiment.image_read,
        overview_detail=None if experiment.overview_detail == "auto" else experiment.overview_detail,
        random_crops=random_patch and experiment.random_patch_tool == "slide_zoom",
        random_regions=random_patch and experiment.random_patch_tool == "view_random_region",
        seed=experiment.seed,
        name=experiment.agent,
    )
