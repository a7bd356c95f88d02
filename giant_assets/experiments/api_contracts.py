"""What the providers' APIs accept, where an experiment's settings could break it: a small, documented
table by model-name prefix (the longest matching prefix wins; a model in no row is unknown).

- ``reasons(provider, model)``: whether the model takes reasoning options (OpenAI ``reasoning`` /
  ``reasoning_effort``, Anthropic ``thinking``). True: sent; False: never sent (the API refuses them);
  None (unknown, e.g. a local server's model): sent as configured, turned off by ``reasoning_effort:
  null`` / ``thinking_budget: 0``.
- ``output_limit(model)``: an Anthropic model's most output tokens per request (``max_tokens``).
- Anthropic's image rules: at most ``MAX_IMAGES`` images per request, each at most ``MAX_IMAGE_PX`` on
  its long side and ``MAX_IMAGE_B64`` bytes of base64; with more than ``MANY_IMAGES`` images in one
  request, each at most ``MANY_IMAGES_PX``.

- ``gemini_thinking_range(model)``: the thinking budgets a Gemini model takes (Gemini API, "Thinking").
- Azure, OpenRouter, Bedrock and Vertex serve the OpenAI and Anthropic models under these same rules
  (looked up by the model's OpenAI/Anthropic name; OpenRouter's ``vendor/`` prefix is dropped).

Checked against the providers' documentation of 2025-12; a new model family needs a row here.
"""

from __future__ import annotations

# (provider, model-name prefix) -> takes reasoning options
REASONING: dict[tuple[str, str], bool] = {
    ("openai", "gpt-5"): True,
    ("openai", "gpt-5-chat"): False,  # gpt-5-chat-latest: the ChatGPT model, no reasoning options
    ("openai", "o1"): True,
    ("openai", "o1-mini"): False,  # the o1 previews refuse reasoning_effort
    ("openai", "o1-preview"): False,
    ("openai", "o3"): True,
    ("openai", "o4"): True,
    ("openai", "gpt-4"): False,  # gpt-4, gpt-4-turbo, gpt-4o, gpt-4o-mini, gpt-4.1, gpt-4.5
    ("openai", "gpt-3.5"): False,
    ("openai", "chatgpt-4o"): False,
    ("anthropic", "claude-3-7-sonnet"): True,
    ("anthropic", "claude-sonnet-4"): True,  # claude-sonnet-4, claude-sonnet-4-5
    ("anthropic", "claude-opus-4"): True,  # claude-opus-4, -4-1, -4-5
    ("anthropic", "claude-haiku-4"): True,  # claude-haiku-4-5
    ("anthropic", "claude-3"): False,  # claude-3-opus/-sonnet/-haiku, claude-3-5-sonnet/-haiku
    ("anthropic", "claude-2"): False,
    ("anthropic", "claude-instant"): False,
}

# Anthropic model-name prefix -> most output tokens of one request (max_tokens, thinking included)
OUTPUT_LIMITS: dict[str, int] = {
    "claude-sonnet-4": 64_000,
    "claude-3-7-sonnet": 64_000,
    "claude-opus-4": 32_000,
    "claude-opus-4-5": 64_000,
    "claude-haiku-4": 64_000,
    "claude-3-5": 8_192,
    "claude-3-haiku": 4_096,
    "claude-3-opus": 4_096,
}

THINKING_MIN = 1024  # Anthropic's smallest thinking budget_tokens
OFFICIAL_ANTHROPIC_MAX_TOKENS = 30_000  # the official Claude agent's and baselines' max_tokens
OFFICIAL_CHAT_MAX_TOKENS = 4096  # the official gpt-4o baselines' Chat Completions max_tokens
MAX_IMAGES = 100
MANY_IMAGES = 20
MANY_IMAGES_PX = 2000
MAX_IMAGE_PX = 8000
MAX_IMAGE_B64 = 5 * 1024 * 1024


def _longest(prefixes: list[str], model: str) -> str | None:
    found = [p for p in prefixes if model.lower().startswith(p)]
    return max(found, key=len) if found else None


def reasons(provider: str, model: str) -> bool | None:
    """Whether ``model`` takes reasoning options; None when the table does not know it."""
    prefix = _longest([p for (prov, p) in REASONING if prov == provider], model)
    return None if prefix is None else REASONING[(provider, prefix)]


def output_limit(model: str) -> int | None:
    """The most output tokens one request of this Anthropic model may ask for; None when unknown."""
    prefix = _longest(list(OUTPUT_LIMITS), model)
    return None if prefix is None else OUTPUT_LIMITS[prefix]


def anthropic_max_tokens(model: str, max_tokens: int | None = None) -> int:
    """The ``max_tokens`` (thinking included) a Messages request asks for: ``max_tokens`` when given,
    else the official 30000, lowered to the model's output limit when that is known to be lower."""
    if max_tokens is not None:
        return max_tokens
    limit = output_limit(model)
    return min(OFFICIAL_ANTHROPIC_MAX_TOKENS, limit) if limit else OFFICIAL_ANTHROPIC_MAX_TOKENS


# Gemini model-name prefix -> (least, most thinking tokens, whether 0 turns thinking off)
GEMINI_THINKING: dict[str, tuple[int, int, bool]] = {
    "gemini-2.5-pro": (128, 32_768, False),
    "gemini-2.5-flash": (1, 24_576, True),
    "gemini-2.5-flash-lite": (512, 24_576, True),
}


def gemini_thinking_range(model: str) -> tuple[int, int, bool] | None:
    """(least, most, may be 0) thinking budget of a Gemini model; None when unknown (sent as set)."""
    prefix = _longest(list(GEMINI_THINKING), model)
    return None if prefix is None else GEMINI_THINKING[prefix]


def vendor_model(model: str) -> str:
    """An OpenRouter name without its vendor (``openai/gpt-5`` -> ``gpt-5``), as the tables know it."""
    return model.rsplit("/", 1)[-1]
