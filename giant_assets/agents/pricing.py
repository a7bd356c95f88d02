"""USD prices per model (per million input, cached-input, cache-write and output tokens), the cost of a
model call, and the providers' published image-token rules.

The defaults are list prices copied by hand (2025-12) for a few well-known models; they change, so
check them against the provider's price page and override them for real accounting: an experiment's
``prices`` field comes first, then a JSON/YAML file named by ``GIANT_PRICES``, then this table
(``experiment_prices``; ``price_record`` says which one priced a model). A model no source prices has
an unknown cost (NaN, "not counted"), never $0: ``unpriced_refusal`` refuses a capped paid experiment
without a price before it sends anything. Cached input is billed at ``cached_input_per_mtok`` (OpenAI:
a tenth to a half of input; Anthropic cache reads: a tenth), Anthropic cache writes at
``cache_write_per_mtok`` (1.25x input for the 5-minute cache); either defaults to the input price.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from giant_assets.core.settings import PRICES_ENV, env
from giant_assets.experiments.spec import Experiment

_LOG = logging.getLogger(__name__)


BUILT_IN, FROM_FILE, FROM_EXPERIMENT = "built-in", "file", "experiment"


@dataclass(frozen=True)
class ModelPrice:
    input_per_mtok: float  # USD per 1M input tokens
    output_per_mtok: float  # USD per 1M output tokens
    is_default: bool = False  # True for the built-in table: check it before trusting totals
    cached_input_per_mtok: float | None = None  # cache reads; None: the input price
    cache_write_per_mtok: float | None = None  # cache writes (Anthropic); None: the input price
    source: str = ""  # where the price comes from: experiment, file or built-in ("": given in code)

    def usd(self, input_tokens: int, output_tokens: int, cached: int = 0, written: int = 0) -> float:
        """``input_tokens`` counts all input tokens; ``cached`` and ``written`` of them are billed apart."""
        cached_rate = (
            self.input_per_mtok if self.cached_input_per_mtok is None else self.cached_input_per_mtok
        )
        write_rate = self.input_per_mtok if self.cache_write_per_mtok is None else self.cache_write_per_mtok
        plain = max(0, input_tokens - cached - written)
        return (
            plain * self.input_per_mtok
            + cached * cached_rate
            + written * write_rate
            + output_tokens * self.output_per_mtok
        ) / 1e6


@dataclass(frozen=True)
class Cost:
    usd: float  # NaN when the model has no price: unknown, never counted as 0
    priced: bool
    price_key: str | None = None  # the table entry used


# Built-in defaults, USD per 1M tokens, standard tier (list prices as copied 2025-12). CHECK BEFORE USE.
# (input, cached input, cache write, output); cache write None: not billed apart (OpenAI).
DEFAULT_PRICES: dict[str, ModelPrice] = {
    name: ModelPrice(inp, out, True, cached, write, BUILT_IN)
    for name, (inp, cached, write, out) in {
        "gpt-5.2": (1.75, 0.175, None, 14.0),
        "gpt-5.1": (1.25, 0.125, None, 10.0),
        "gpt-5": (1.25, 0.125, None, 10.0),
        "gpt-5-mini": (0.25, 0.025, None, 2.0),
        "gpt-5-nano": (0.05, 0.005, None, 0.40),
        "gpt-4.1": (2.0, 0.50, None, 8.0),
        "gpt-4.1-mini": (0.40, 0.10, None, 1.60),
        "gpt-4o": (2.50, 1.25, None, 10.0),
        "gpt-4o-mini": (0.15, 0.075, None, 0.60),
        "claude-opus-4-5": (5.0, 0.50, 6.25, 25.0),
        "claude-opus-4-1": (15.0, 1.50, 18.75, 75.0),
        "claude-opus-4": (15.0, 1.50, 18.75, 75.0),
        "claude-sonnet-4-5": (3.0, 0.30, 3.75, 15.0),
        "claude-sonnet-4": (3.0, 0.30, 3.75, 15.0),
        "claude-haiku-4-5": (1.0, 0.10, 1.25, 5.0),
        "claude-3-5-haiku": (0.80, 0.08, 1.0, 4.0),
        # Gemini API, paid tier, Standard, prompts up to 200k tokens (longer ones cost more; GIANT's stay far
        # below); cached input: context-cache reads, implicit or explicit (explicit caches' storage per hour
        # is not counted: this platform creates none). Checked against the page as stored with "Last updated
        # 2025-10-31 UTC" (the 2.5 rows; gemini-3-pro-preview from later copies of the same page, 2026-01).
        # Vertex AI bills these models at the same rates (global endpoint; the 2.5 models in any region).
        "gemini-3-pro-preview": (2.0, 0.20, None, 12.0),
        "gemini-2.5-pro": (1.25, 0.125, None, 10.0),
        "gemini-2.5-flash": (0.30, 0.03, None, 2.50),
        "gemini-2.5-flash-lite": (0.10, 0.01, None, 0.40),
    }.items()
}
# Where and when the built-in prices were read. Azure OpenAI (Global Standard deployments), Claude on
# Bedrock and Vertex AI (global endpoints), Gemini on Vertex AI and OpenRouter bill these same models at
# these list prices; regional / data-zone deployments cost about 10% more (on Vertex AI: Claude, and the
# Gemini 3 models outside the global endpoint): override them in a price file for those.
PRICE_SOURCES: dict[str, tuple[str, str]] = {
    "openai": ("https://openai.com/api/pricing/", "2025-12"),
    "anthropic": ("https://www.anthropic.com/pricing#api", "2025-12"),
    "gemini": ("https://ai.google.dev/gemini-api/docs/pricing", "2025-10-31 (page date; checked 2026-11-26)"),
    "azure": ("https://azure.microsoft.com/pricing/details/cognitive-services/openai-service/", "2025-12"),
    "bedrock": ("https://aws.amazon.com/bedrock/pricing/", "2025-12"),
    "vertex": ("https://cloud.google.com/vertex-ai/generative-ai/pricing", "2025-12; Gemini rows 2025-11"),
    "openrouter": ("https://openrouter.ai/models", "2025-12"),
}


def image_tokens(provider: str, width: int, height: int, model: str = "") -> int:
    """Input tokens of one image by the provider's published rule (OpenAI: ``detail: high``).

    OpenAI (GPT-5 family 70 + 140 per tile; GPT-4o/4.1 85 + 170): fit in 2048x2048, shrink so the
    short side is at most 768, count 512 px tiles. Anthropic: long side capped at 1568, then
    width x height / 750. Gemini (2.x): 258 tokens for an image within 384x384, else 258 per 768 px
    tile. ``provider`` is the API family (``Experiment.family``): azure and openrouter count as openai,
    bedrock and vertex as anthropic.
    """
    if provider == "gemini":
        if max(width, height) <= 384:
            return 258
        return 258 * math.ceil(width / 768) * math.ceil(height / 768)
    if provider == "anthropic":
        s = min(1.0, 1568 / max(width, height))
        return math.ceil(round(width * s) * round(height * s) / 750)
    base, per_tile = (70, 140) if model.startswith("gpt-5") or not model else (85, 170)
    s = min(1.0, 2048 / max(width, height))
    w, h = width * s, height * s
    s = min(1.0, 768 / min(w, h))
    w, h = w * s, h * s
    return base + per_tile * math.ceil(w / 512) * math.ceil(h / 512)


class PriceTable:
    """Looks a model up by exact name, else by the longest table key it starts with at a '-' boundary
    (so dated snapshots like ``claude-sonnet-4-20250514`` find ``claude-sonnet-4``)."""

    def __init__(self, prices: Mapping[str, ModelPrice], file: str = "") -> None:
        self.prices = dict(prices)
        self.file = file  # the price file read into it (its entries' source: file)
        self._warned: set[str] = set()

    def scaled(self, factor: float) -> PriceTable:
        """Every rate times ``factor`` (batch APIs bill every token class at half the synchronous rate)."""

        def scale(rate: float | None) -> float | None:
            return None if rate is None else rate * factor

        return PriceTable(
            {
                name: ModelPrice(
                    p.input_per_mtok * factor,
                    p.output_per_mtok * factor,
                    p.is_default,
                    scale(p.cached_input_per_mtok),
                    scale(p.cache_write_per_mtok),
                    p.source,
                )
                for name, p in self.prices.items()
            },
            self.file,
        )

    def lookup(self, model: str) -> tuple[str, ModelPrice] | None:
        """The entry for ``model``; an OpenRouter name (``vendor/model``) not in the table is looked up
        without its vendor, then with its version dots as dashes (``claude-sonnet-4.5`` ->
        ``claude-sonnet-4-5``), as the providers' own tables name the model."""
        names = [model]
        if "/" in model:
            bare = model.rsplit("/", 1)[-1]
            names += [bare, re.sub(r"(?<=\d)\.(?=\d)", "-", bare)]
        for name in names:
            found = self._lookup(name)
            if found is not None:
                return found
        return None

    def _lookup(self, model: str) -> tuple[str, ModelPrice] | None:
        if model in self.prices:
            return model, self.prices[model]
        keys = [k for k in self.prices if model.startswith(k + "-")]
        if not keys:
            return None
        key = max(keys, key=len)
        return key, self.prices[key]

    def cost(
        self,
        model: str,
        input_tokens: int,
        output_tokens: int,
        cached_input_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> Cost:
        """USD for one call (``input_tokens`` includes the cached and cache-written ones); an unknown
        model's cost is NaN with ``priced=False`` (warned once per model)."""
        found = self.lookup(model)
        if found is None:
            if model not in self._warned:
                self._warned.add(model)
                _LOG.warning("no price for model %r: cost unknown (not counted). %s", model, HOW_TO_PRICE)
            return Cost(math.nan, priced=False)
        key, price = found
        usd = price.usd(input_tokens, output_tokens, cached_input_tokens, cache_write_tokens)
        return Cost(usd, priced=True, price_key=key)


def load_price_table(overrides: Mapping[str, Any] | str | Path | None = None) -> PriceTable:
    """The default table updated with ``overrides``: a mapping or a JSON/YAML file of
    ``{model: {"input_per_mtok": float, "output_per_mtok": float}}``, optionally with
    ``cached_input_per_mtok`` and ``cache_write_per_mtok``."""
    prices = dict(DEFAULT_PRICES)
    if overrides is None:
        return PriceTable(prices)
    source, origin = "price overrides", ""
    if isinstance(overrides, str | Path):
        source, origin = str(overrides), FROM_FILE
        overrides = _read_file(Path(overrides))
    if not isinstance(overrides, Mapping):
        raise ValueError(f"{source}: expected a mapping of model -> prices, got {type(overrides).__name__}")
    for model, entry in overrides.items():
        price = _parse_entry(entry, f"{source}: model {model!r}")
        prices[str(model)] = replace(price, source=origin) if origin else price
    return PriceTable(prices, source if origin else "")


HOW_TO_PRICE = (
    "Give it a price in one of three ways: the experiment's prices field ({input_per_mtok, "
    "output_per_mtok}), a JSON/YAML price file named by GIANT_PRICES, or an entry of the built-in table "
    "(giant_assets/agents/pricing.py)"
)


def experiment_prices(exp: Experiment, price_file: str | Path | None = None) -> PriceTable:
    """The table that prices ``exp``'s calls: its ``prices`` field for its model, ahead of the price file
    (``price_file``, default ``GIANT_PRICES``), ahead of the built-in table."""
    table = load_price_table((env(PRICES_ENV) if price_file is None else price_file) or None)
    if exp.prices is not None and exp.model:
        p = exp.prices
        table.prices[exp.model] = ModelPrice(
            p.input_per_mtok, p.output_per_mtok, False, p.cached_input_per_mtok, p.cache_write_per_mtok,
            FROM_EXPERIMENT,
        )  # fmt: skip
    return table


def price_record(exp: Experiment, table: PriceTable) -> dict[str, Any]:
    """Which price ``exp``'s model is billed at and where it comes from, as recorded with its runs:
    ``source`` experiment, file (with ``file``: its path) or built-in (with ``page`` and ``read``: where
    and when the table was copied), or none (the cost is unknown)."""
    if not exp.calls_model:
        return {"source": "none", "model": "", "note": "offline agent: no model call, no cost"}
    found = table.lookup(exp.model)
    if found is None:
        return {"source": "none", "model": exp.model, "note": "no price: cost unknown (not counted)"}
    key, price = found
    record: dict[str, Any] = {
        "source": price.source or "given in code", "model": exp.model, "price_key": key,
        "input_per_mtok": price.input_per_mtok, "output_per_mtok": price.output_per_mtok,
        "cached_input_per_mtok": price.cached_input_per_mtok,
        "cache_write_per_mtok": price.cache_write_per_mtok,
    }  # fmt: skip
    if price.source == FROM_FILE:
        record["file"] = table.file
    elif price.source == BUILT_IN:
        page, read = PRICE_SOURCES.get(exp.provider, PRICE_SOURCES[exp.family])
        record |= {"page": page, "read": read}
    return record


def unpriced_refusal(exp: Experiment, table: PriceTable) -> str | None:
    """Why ``exp`` may not send anything: it is paid, capped (``budget_usd`` or ``experiment_budget_usd``
    above 0) and no source prices its model, so no cap could be kept; None when it may (uncapped, its
    cost is then unknown: NaN, never $0)."""
    capped = (exp.budget_usd or 0) > 0 or (exp.experiment_budget_usd or 0) > 0
    if not exp.paid or not capped or table.lookup(exp.model) is not None:
        return None
    return (
        f"experiment {exp.name!r}: no price for model {exp.model!r}, so its budget cannot be kept and "
        f"nothing is sent. {HOW_TO_PRICE}; or set budget_usd: 0 (and no experiment_budget_usd) to run "
        "it uncapped, its cost shown as unknown"
    )


def _read_file(path: Path) -> Any:
    if not path.is_file():
        raise FileNotFoundError(f"price table file not found: {path}")
    text = path.read_text()
    is_json = path.suffix.lower() == ".json"
    try:
        return json.loads(text) if is_json else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: not valid {'JSON' if is_json else 'YAML'}: {exc}") from exc


def _parse_entry(entry: Any, where: str) -> ModelPrice:
    if isinstance(entry, ModelPrice):
        return entry
    if not isinstance(entry, Mapping):
        raise ValueError(f"{where}: expected {{input_per_mtok, output_per_mtok}}, got {entry!r}")
    values = [_price_field(entry, field, where) for field in ("input_per_mtok", "output_per_mtok")]
    extra = {
        f: _price_field(entry, f, where)
        for f in ("cached_input_per_mtok", "cache_write_per_mtok")
        if f in entry
    }
    return ModelPrice(values[0], values[1], is_default=False, **extra)


def _price_field(entry: Mapping[str, Any], field: str, where: str) -> float:
    try:
        value = float(entry[field])
    except KeyError:
        raise ValueError(f"{where}: missing field {field!r}") from None
    except (TypeError, ValueError):
        raise ValueError(f"{where}: field {field!r} must be a number, got {entry[field]!r}") from None
    if not value >= 0:
        raise ValueError(f"{where}: field {field!r} must be >= 0, got {value}")
    return value
