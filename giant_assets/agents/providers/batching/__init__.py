"""Batch mode: every model request of an experiment goes through the provider's batch API, at half price.

A run's requests are the same bytes whatever the transport, so each is named by a digest of the run
that sends it (``runs/run_identity.py``: the runs of one item stay separate samples) and its wire body
(its ``custom_id``), and answered from a durable store once any batch has answered it. A *round*
collects the next request of every run that is waiting for the model into batches (split at the
provider's request and byte limits), submits them and waits for them to end: a GIANT run advances one
step per round, a single-call baseline finishes in one.

Two ways to wait (``BatchRound.mode``):

- ``hold``: the process polls until the round's batches end, then the runs go on to their next round.
- ``detach``: the round is submitted and every waiting run stops with ``BatchPending`` (nothing is
  journalled for it); a later call of the same runs (the next materialization, launched by the batch
  sensor when a batch ends) replays them: every request answered before is answered from the store at
  no cost, and the runs stop again at their first request still open, or go on.

Nothing paid for is asked again: the store (append-only JSONL, fsynced) records each batch before it
is polled and each answer as soon as its batch ends; a request whose answer is stored, or that sits in
a batch not yet ended, is never submitted again. Lines that come back errored or expired go into the
next round, up to ``max_line_attempts`` submissions, then fail their run with a ``ProviderError``.

A batch the provider accepted but whose id was never recorded (the process killed while the create's
reply was on its way, or the create timed out) is *adopted*, not paid for again: each batch is
preceded by a durable intent (its round tag and custom ids, ``intents.jsonl``), and once per process,
before its first request is answered, every intent without a batch record is looked up at the
provider (``BatchRound.adopt``): OpenAI by the ``giant_round`` metadata the batch carries, Azure by the
name of its input file (``giant-round-<tag>.jsonl``: Azure shows no metadata), Gemini by its
``display_name``, Anthropic (no metadata) by the one unrecorded batch created since the intent with the
same number of requests.
A batch found is recorded as if just submitted; none found (or, Anthropic, several that fit) resolves
the intent and its requests go into a normal round.

Modules: ``store`` (the durable store and its lock: one submitter per store), ``rounds`` (the round
scheduler and adoption), ``client`` (what a provider's batch client offers: every call under the retry
policy, result lines read one by one), ``openai_batches``, ``azure_batches`` (OpenAI's wire at an Azure
OpenAI resource), ``anthropic_batches`` and ``gemini_batches`` (one per provider).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from giant_assets.agents.providers.batching.anthropic_batches import ANTHROPIC_LIMITS, AnthropicBatches
from giant_assets.agents.providers.batching.azure_batches import AZURE_LIMITS, AZURE_LINE_URLS, AzureBatches
from giant_assets.agents.providers.batching.client import BatchClient, BatchStatus, ListedBatch
from giant_assets.agents.providers.batching.openai_batches import OPENAI_LIMITS, OpenAIBatches
from giant_assets.agents.providers.batching.rounds import (
    CLOCK_SLACK_S,
    BatchPending,
    BatchRound,
    custom_id,
    intent_candidates,
)
from giant_assets.agents.providers.batching.store import ENDED, BatchStore
from giant_assets.agents.providers.retry import RetryPolicy

# every provider bills batch tokens at half the synchronous rate (Azure: Global Batch at 50% of Global
# Standard, learn.microsoft.com/azure/ai-foundry/openai/how-to/batch; Gemini: its Batch API at 50%)
BATCH_DISCOUNT = 0.5

# Gemini's batch client loads google.genai (a second or two of imports): only a Gemini model pays for it
_GEMINI = ("GEMINI_LIMITS", "GeminiBatches")
_GEMINI_MODULE = "giant_assets.agents.providers.batching.gemini_batches"


def __getattr__(name: str) -> Any:
    if name in _GEMINI:
        return getattr(importlib.import_module(_GEMINI_MODULE), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ANTHROPIC_LIMITS", "AZURE_LIMITS", "BATCH_DISCOUNT", "CLOCK_SLACK_S", "ENDED", "GEMINI_LIMITS",
    "OPENAI_LIMITS", "AnthropicBatches", "AzureBatches", "BatchClient", "BatchPending", "BatchRound",
    "BatchStatus", "BatchStore", "GeminiBatches", "ListedBatch", "OpenAIBatches", "attach", "batch_client",
    "custom_id", "intent_candidates",
]  # fmt: skip


def batch_client(model: Any, retry: RetryPolicy | None = None) -> BatchClient:
    """The batch API of an ``SDKChatModel``'s provider and wire format, over the model's own SDK client,
    every call under ``retry`` (default: the model's own policy) with the model's error classification."""
    kw = {"retry": retry or model.retry, "classify": model._classify, "rng": model._rng}
    if model.provider == "anthropic":
        return AnthropicBatches(model._client, "/v1/messages", **kw)
    if model.provider == "azure":
        return AzureBatches(model._client, AZURE_LINE_URLS[model.endpoint], **kw)
    if model.provider == "gemini":
        path = f"/v1beta/models/{model.name}:generateContent"
        return importlib.import_module(_GEMINI_MODULE).GeminiBatches(
            model._client, path, model=model.name, **kw
        )
    return OpenAIBatches(model._client, "/v1" + model.endpoint, **kw)


def attach(agent: Any, folder: Path, experiment: Any, log: Callable[[str], None]) -> BatchRound:
    """Switch ``agent``'s model calls to batches stored under ``folder`` and its prices to batch prices."""
    chat = getattr(agent, "chat", None)
    if chat is None or not hasattr(chat, "batch"):
        raise ValueError(f"batch: true: agent {experiment.agent!r} has no provider model to batch")
    store = BatchStore(folder, {"experiment": experiment.name})
    chat.batch = BatchRound(
        batch_client(chat),
        store,
        mode=experiment.batch_wait,
        poll_s=experiment.batch_poll_s,
        max_requests=experiment.batch_max_requests,
        max_line_attempts=experiment.batch_max_line_attempts,
        log=log,
    )
    agent.prices = agent.prices.scaled(BATCH_DISCOUNT)
    return chat.batch
