"""What a paid reply costs as the reply store records it (``SDKChatModel._accounting``), from each
provider's usage block parsed by its own SDK, by hand arithmetic at explicit prices.

The usage blocks follow the published references: OpenAI Chat Completions ``usage.prompt_tokens_details
.cached_tokens`` and Responses ``usage.input_tokens_details.cached_tokens``
(platform.openai.com/docs/api-reference), both part of the prompt count; Anthropic Messages
``usage.input_tokens`` excluding ``cache_read_input_tokens`` and ``cache_creation_input_tokens``
(docs.anthropic.com/en/docs/build-with-claude/prompt-caching#tracking-cache-performance); Gemini
``usageMetadata.cachedContentTokenCount`` part of ``promptTokenCount``, ``thoughtsTokenCount`` billed as
output (ai.google.dev/api/generate-content#UsageMetadata)."""

from __future__ import annotations

from typing import Any

import pytest

from giant_assets.agents.pricing import ModelPrice, PriceTable
from giant_assets.agents.providers import AnthropicChatModel, OpenAIChatModel, OpenAIResponsesModel
from giant_assets.agents.providers.gemini import GeminiChatModel

LOOPBACK = "http://127.0.0.1:9"  # never contacted: only the SDK's parsing and the accounting run
# $ per 1M tokens: input 4, cached 1, cache write 5, output 10 (distinct, so a swapped term shows)
PRICES = PriceTable({"m": ModelPrice(4.0, 10.0, False, 1.0, 5.0)})


def recorded(model: Any, body: dict[str, Any]) -> dict[str, Any]:
    model.prices = PRICES
    return model._accounting(model._reply(model._revive(body)).usage)


def test_openai_chat_cached_tokens_are_billed_at_the_cached_rate() -> None:
    """Mutations: cached tokens read as 0; cached tokens billed at the input rate too (counted twice)."""
    body = {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "ok"}}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100,
                      "prompt_tokens_details": {"cached_tokens": 600}}}  # fmt: skip
    rec = recorded(OpenAIChatModel("m", base_url=LOOPBACK), body)
    assert (rec["input_tokens"], rec["cached_input_tokens"], rec["output_tokens"]) == (1000, 600, 100)
    assert rec["cost_usd"] == pytest.approx((400 * 4 + 600 * 1 + 100 * 10) / 1e6)


def test_openai_responses_cached_tokens_are_billed_at_the_cached_rate() -> None:
    body = {"id": "r", "object": "response", "created_at": 0, "model": "m", "status": "completed",
            "output": [{"type": "message", "id": "o", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": "ok", "annotations": []}]}],
            "parallel_tool_calls": False, "tool_choice": "auto", "tools": [],
            "usage": {"input_tokens": 2000, "output_tokens": 50, "total_tokens": 2050,
                      "input_tokens_details": {"cached_tokens": 1500},
                      "output_tokens_details": {"reasoning_tokens": 20}}}  # fmt: skip
    rec = recorded(OpenAIResponsesModel("m", base_url=LOOPBACK), body)
    assert (rec["input_tokens"], rec["cached_input_tokens"], rec["output_tokens"]) == (2000, 1500, 50)
    assert rec["cost_usd"] == pytest.approx((500 * 4 + 1500 * 1 + 50 * 10) / 1e6)


def test_anthropic_cache_reads_and_writes_are_billed_apart() -> None:
    """Mutations: reads or writes left out of the input count; reads not at the cached rate; writes not
    at the cache-write rate (the reply store's cost without ``cache_write_tokens``)."""
    body = {"id": "msg", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 300, "output_tokens": 100, "cache_read_input_tokens": 2000,
                      "cache_creation_input_tokens": 700}}  # fmt: skip
    rec = recorded(AnthropicChatModel("m", base_url=LOOPBACK), body)
    assert (rec["input_tokens"], rec["cached_input_tokens"], rec["output_tokens"]) == (3000, 2000, 100)
    assert rec["cost_usd"] == pytest.approx((300 * 4 + 2000 * 1 + 700 * 5 + 100 * 10) / 1e6)


def test_gemini_cached_content_and_thoughts_are_billed() -> None:
    """Mutations: ``cachedContentTokenCount`` read as 0; thinking tokens not billed as output."""
    body = {"candidates": [{"content": {"role": "model", "parts": [{"text": "ok"}]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 5000, "candidatesTokenCount": 80, "thoughtsTokenCount": 120,
                              "cachedContentTokenCount": 4000, "totalTokenCount": 5200}}  # fmt: skip
    rec = recorded(GeminiChatModel("m", base_url=LOOPBACK, require_key=False), body)
    assert (rec["input_tokens"], rec["cached_input_tokens"], rec["output_tokens"]) == (5000, 4000, 200)
    assert rec["cost_usd"] == pytest.approx((1000 * 4 + 4000 * 1 + 200 * 10) / 1e6)
