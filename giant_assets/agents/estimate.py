"""What an experiment will cost and how long it will take, before it spends: a range, not one number.

The token model follows the protocol: a GIANT run makes up to ``max_steps`` model calls, call ``k``
resending the system prompt, the question, the overview and the ``k - 1`` crops so far (prompt caching
bills the resent prefix at the cached rate); the thumbnail baseline makes one call with one image; the
patch baseline ``n_patches`` calls with one patch each. Images are counted by the providers' published
rules (``pricing.image_tokens``). Three quantities are uncertain and given as a low-high range:

- **calls per GIANT run**: ``max_steps / 2`` to ``max_steps`` (the protocol asks the model to use its
  steps; reruns after a step budget ran out are not in the range);
- **hidden reasoning tokens per call**: by reasoning effort / thinking budget (``REASONING_TOKENS``);
  this is most of the output bill of a reasoning model;
- **latency per call**: ``LATENCY_S`` by whether the model reasons.

Where the journals already hold finished runs of the same agent and model at the same endpoint (the
experiment's own result set, and others whose ``settings.json`` says so: ``calibration_sources``; a
rehearsal at a local server never calibrates the provider's API), the measured means (calls
per run, output and input tokens per call, latency) replace the assumed ones and the range narrows to
+-25 % around them (``Estimate.measured_runs`` says how many runs that rests on).

A plug-in agent is estimated from the calls per run its factory declares for each model it calls
(``expected_calls``, docs/plugins.md), each model's tokens by the protocol's shape and priced at that
model's own price; a plug-in that declares none has unknown calls, cost and time (never a silent
undercount). Its finished runs do not calibrate it (a run's tokens mix its models).

Batch prices: OpenAI's Batch API, Anthropic's Message Batches and the Gemini Batch API bill every
token class at half the synchronous rate (``BATCH_DISCOUNT``); a batch round may take up to 24 h, and
a GIANT run needs one round per step.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from giant_assets.agents.pricing import HOW_TO_PRICE, PriceTable, image_tokens
from giant_assets.core.secrets import public_url
from giant_assets.experiments.api_contracts import vendor_model
from giant_assets.experiments.itemsample import sample_items
from giant_assets.experiments.plugins import PluginError, declared_calls, is_plugin
from giant_assets.experiments.spec import NAVIGATING, PROVIDER_BASE_URLS, Experiment
from giant_assets.runs.replies import SUFFIX as REPLIES_SUFFIX

BATCH_DISCOUNT = 0.5
SYSTEM_PROMPT_TOKENS = 700  # the multi-step system prompt with the slide size and step budget
TOOL_TURN_TOKENS = 60  # a tool call and the tool result's text around each crop
VISIBLE_OUTPUT_TOKENS = (80, 250)  # text of one reply (tool call or <report>/<response>)
# hidden reasoning tokens per call (low, high), by OpenAI reasoning effort
REASONING_TOKENS: dict[str | None, tuple[int, int]] = {
    None: (0, 0),
    "minimal": (0, 200),
    "low": (100, 800),
    "medium": (300, 1500),
    "high": (800, 3000),
}
LATENCY_S = {True: (8.0, 40.0), False: (1.0, 6.0)}  # per call: reasoning model, other
MEASURED_SPREAD = 0.25
OVERVIEW_ASPECT = 0.75  # overview short side / long side (a typical slide)


@dataclass(frozen=True)
class Span:
    """A low-high range."""

    low: float
    high: float

    def __mul__(self, k: float) -> Span:
        return Span(self.low * k, self.high * k)

    def __add__(self, other: Span) -> Span:
        return Span(self.low + other.low, self.high + other.high)

    def fmt(self, digits: int = 0, unit: str = "") -> str:
        if math.isnan(self.low) or math.isnan(self.high):
            return "unknown"
        lo, hi = (f"{v:,.{digits}f}" for v in (self.low, self.high))
        return f"{unit}{lo}" if lo == hi else f"{unit}{lo}-{unit}{hi}"


@dataclass(frozen=True)
class Measured:
    """Means over finished runs of one agent and model, from the journals."""

    runs: int
    calls_per_run: float
    input_per_call: float
    cached_per_call: float
    output_per_call: float
    latency_per_call: float
    sources: tuple[tuple[str, int], ...] = ()  # (result-set folder, its runs counted)


@dataclass
class Estimate:
    """One experiment on one benchmark."""

    experiment: str
    benchmark_name: str
    items: int
    runs_total: int
    runs_done: int
    calls: Span
    input_tokens: Span
    cached_tokens: Span
    output_tokens: Span
    usd: Span
    usd_batch: Span
    hours: Span
    batch_rounds: int
    priced: bool
    measured_runs: int = 0
    notes: list[str] = field(default_factory=list)
    without_slide: int = 0  # questions of the benchmark left out: no readable slide now

    @property
    def runs_pending(self) -> int:
        return self.runs_total - self.runs_done

    def row(self) -> dict[str, Any]:
        """Flat columns for a table or Dagster metadata."""
        out: dict[str, Any] = {
            "experiment": self.experiment,
            "benchmark_name": self.benchmark_name,
            "items": self.items,
            "runs_pending": self.runs_pending,
            "runs_done": self.runs_done,
            "batch_rounds": self.batch_rounds,
            "priced": self.priced,
            "measured_runs": self.measured_runs,
            "without_slide": self.without_slide,
        }
        for name in ("calls", "input_tokens", "cached_tokens", "output_tokens", "usd", "usd_batch", "hours"):
            span: Span = getattr(self, name)
            out[f"{name}_low"], out[f"{name}_high"] = span.low, span.high
        return out


def _reasoning_range(exp: Experiment) -> tuple[int, int]:
    if exp.family in ("anthropic", "gemini"):
        budget = exp.thinking_budget or 0
        return (int(budget * 0.3), budget)
    return REASONING_TOKENS.get(exp.resolved_reasoning_effort, (0, 0))


def _reasons(exp: Experiment) -> bool:
    return _reasoning_range(exp)[1] > 0


def _calls_per_run(exp: Experiment) -> Span:
    if not exp.calls_model:  # offline agents call no model
        return Span(0, 0)
    if exp.agent == "thumbnail":
        return Span(1, 1)
    if exp.agent == "patch":
        return Span(exp.n_patches, exp.n_patches)
    return Span(max(1, math.ceil(exp.max_steps / 2)), exp.max_steps)


def _run_tokens(exp: Experiment, calls: int, question_tokens: float) -> tuple[float, float]:
    """(input, cached input) tokens of one run of ``calls`` model calls, by the protocol's shape."""
    size = exp.resolved_image_size
    model = vendor_model(exp.model)  # an OpenRouter name counts as its vendor's model
    if exp.agent == "thumbnail":
        t = exp.thumbnail_size
        return question_tokens + image_tokens(exp.family, t, round(t * OVERVIEW_ASPECT), model), 0.0
    if exp.agent == "patch":
        per_call = question_tokens + image_tokens(exp.family, exp.patch_size, exp.patch_size, model)
        return calls * per_call, 0.0
    overview = image_tokens(exp.family, size, round(size * OVERVIEW_ASPECT), model)
    crop = image_tokens(exp.family, size, size, model) + TOOL_TURN_TOKENS
    # pruning keeps the overview and the newest `max_images_in_context - 1` crops as images (none
    # pruned with Anthropic, as the official Claude agent)
    limit = exp.resolved_max_images_in_context if exp.prunes_tool_images else None
    kept = None if limit is None else limit - 1
    prefix = SYSTEM_PROMPT_TOKENS + question_tokens + overview
    total = cached = 0.0
    for k in range(calls):  # call k carries the first k crops (only the newest `kept` as images)
        shown = k if kept is None else min(k, kept)
        text_only = k - shown
        tokens = prefix + shown * crop + text_only * TOOL_TURN_TOKENS
        total += tokens
        if not k:
            continue
        if kept is None or k <= kept:  # nothing pruned yet: the previous call's prompt is cached
            cached += prefix + (k - 1) * crop
        else:  # cached up to the crop whose image was just pruned
            cached += prefix + (k - 1 - kept) * TOOL_TURN_TOKENS
    return total, cached


def estimate(
    exp: Experiment,
    benchmark_name: str,
    *,
    items: int,
    runs_done: int = 0,
    mean_prompt_chars: float = 600.0,
    prices: PriceTable,
    measured: Measured | None = None,
) -> Estimate:
    """Cost and time of the runs of ``exp`` on one benchmark that the journal does not hold yet."""
    runs_total = items * exp.runs_per_item
    pending = max(0, runs_total - runs_done)
    question = mean_prompt_chars / 4
    if is_plugin(exp.agent):
        return _plugin_estimate(exp, benchmark_name, runs_total, runs_done, question, prices)
    notes: list[str] = []
    calls_run = _calls_per_run(exp)
    reasoning = _reasoning_range(exp)
    out_low = VISIBLE_OUTPUT_TOKENS[0] + reasoning[0]
    out_high = VISIBLE_OUTPUT_TOKENS[1] + reasoning[1]
    in_low, cached_low = _run_tokens(exp, int(calls_run.low), question)
    in_high, cached_high = _run_tokens(exp, int(calls_run.high), question)
    latency = Span(*LATENCY_S[_reasons(exp)])
    if measured is not None and measured.runs:
        lo, hi = 1 - MEASURED_SPREAD, 1 + MEASURED_SPREAD
        calls_run = Span(measured.calls_per_run * lo, measured.calls_per_run * hi)
        out_low, out_high = measured.output_per_call * lo, measured.output_per_call * hi
        per_run = measured.input_per_call * measured.calls_per_run
        cached_share = measured.cached_per_call / measured.input_per_call if measured.input_per_call else 0.0
        in_low, in_high = per_run * lo, per_run * hi
        cached_low, cached_high = in_low * cached_share, in_high * cached_share
        latency = Span(measured.latency_per_call * lo, measured.latency_per_call * hi)
        used = ", ".join(f"{name} ({runs})" for name, runs in measured.sources) or "the journals"
        notes.append(
            f"calibrated on {measured.runs} finished run(s) of {exp.agent}/{exp.model} at {exp.endpoint}: "
            f"journals {used}"
        )
    calls = Span(calls_run.low * pending, calls_run.high * pending)
    input_tokens = Span(in_low * pending, in_high * pending)
    cached = Span(cached_low * pending, cached_high * pending)
    output = Span(out_low * calls.low, out_high * calls.high)
    found = prices.lookup(exp.model) if exp.model else None
    if not exp.calls_model:
        usd = Span(0.0, 0.0)
        found = ("offline", None)
    elif found is None:  # unknown, never $0
        usd = Span(math.nan, math.nan)
        notes.append(f"no price for model {exp.model!r}: USD unknown. {HOW_TO_PRICE}")
    else:
        price = found[1]
        usd = Span(
            price.usd(int(input_tokens.low), int(output.low), int(cached.low)),
            price.usd(int(input_tokens.high), int(output.high), int(cached.high)),
        )
    runs_at_once = min(exp.concurrency, max(pending, 1))
    by_concurrency = Span(calls_run.low * latency.low, calls_run.high * latency.high) * (
        pending / runs_at_once
    )
    by_rate = Span(calls.low, calls.high) * (60.0 / exp.requests_per_minute)
    hours = Span(max(by_concurrency.low, by_rate.low), max(by_concurrency.high, by_rate.high)) * (1 / 3600)
    rounds = (
        0
        if not pending or not exp.calls_model
        else int(calls_run.high)
        if exp.agent in NAVIGATING or is_plugin(exp.agent)  # a plug-in: up to max_steps rounds, as GIANT
        else 1
    )
    return Estimate(
        experiment=exp.name,
        benchmark_name=benchmark_name,
        items=items,
        runs_total=runs_total,
        runs_done=min(runs_done, runs_total),
        calls=calls,
        input_tokens=input_tokens,
        cached_tokens=cached,
        output_tokens=output,
        usd=usd,
        usd_batch=usd * BATCH_DISCOUNT,
        hours=hours,
        batch_rounds=rounds,
        priced=found is not None,
        measured_runs=measured.runs if measured else 0,
        notes=notes,
    )


def _plugin_estimate(
    exp: Experiment, benchmark_name: str, runs_total: int, runs_done: int, question: float, prices: PriceTable
) -> Estimate:
    """``estimate`` of a plug-in: each model its declared calls per run, its tokens, its own price."""
    from giant_assets.agents.pricing import experiment_prices

    pending = max(0, runs_total - runs_done)
    unknown = Span(math.nan, math.nan)
    zero = Span(0.0, 0.0)
    out = Estimate(exp.name, benchmark_name, runs_total // max(exp.runs_per_item, 1), runs_total,
                   min(runs_done, runs_total), unknown, unknown, unknown, unknown, unknown, unknown, unknown,
                   0, False)  # fmt: skip
    try:
        declared = declared_calls(exp.agent, exp.agent_options or {}, exp.model)
    except PluginError as exc:
        out.notes.append(f"{exc}: its model calls, cost and time are unknown (docs/plugins.md says how to "
                         "declare them)")  # fmt: skip
        return out
    reasoning = _reasoning_range(exp)
    latency = Span(*LATENCY_S[_reasons(exp)])
    calls = tokens = cached = output = usd = zero
    per_run = by_rate = zero
    others = []
    for model, (low, high) in declared.items():
        own = model == exp.model
        one = exp if own else exp.model_copy(update={"model": model, "prices": None, "deployment": ""})
        in_low, cached_low = _run_tokens(one, low, question)
        in_high, cached_high = _run_tokens(one, high, question)
        m_calls = Span(low, high) * pending
        m_in, m_cached = Span(in_low, in_high) * pending, Span(cached_low, cached_high) * pending
        m_out = Span((VISIBLE_OUTPUT_TOKENS[0] + reasoning[0]) * m_calls.low,
                     (VISIBLE_OUTPUT_TOKENS[1] + reasoning[1]) * m_calls.high)  # fmt: skip
        found = (prices if own else experiment_prices(one)).lookup(model)
        if found is None:
            out.notes.append(f"no price for model {model!r}: USD unknown. {HOW_TO_PRICE}")
            usd = unknown
        else:
            price = found[1]
            usd = usd + Span(price.usd(int(m_in.low), int(m_out.low), int(m_cached.low)),
                             price.usd(int(m_in.high), int(m_out.high), int(m_cached.high)))  # fmt: skip
        calls, tokens, cached, output = calls + m_calls, tokens + m_in, cached + m_cached, output + m_out
        per_run = per_run + Span(low, high)
        rated = m_calls * (60.0 / exp.requests_per_minute)  # each model has its own rate limit
        by_rate = Span(max(by_rate.low, rated.low), max(by_rate.high, rated.high))
        others += [] if own or not high else [model]
        out.notes.append(f"{exp.agent}: {Span(low, high).fmt()} call(s) of {model} per run, as it declares")
    runs_at_once = min(exp.concurrency, max(pending, 1))
    by_concurrency = Span(per_run.low * latency.low, per_run.high * latency.high) * (pending / runs_at_once)
    out.calls, out.input_tokens, out.cached_tokens, out.output_tokens = calls, tokens, cached, output
    out.usd, out.priced = usd, not math.isnan(usd.low)
    out.hours = Span(max(by_concurrency.low, by_rate.low), max(by_concurrency.high, by_rate.high)) * (
        1 / 3600
    )
    if others:  # batch mode sends the experiment's model only (kit.chat_model is refused there)
        out.usd_batch = unknown
        out.notes.append(f"batch mode cannot send {', '.join(others)} (only the experiment's model): "
                         "no batch price")  # fmt: skip
    else:
        out.usd_batch = usd * BATCH_DISCOUNT
    own_calls = declared.get(exp.model, (0, 0))[1]
    out.batch_rounds = own_calls if pending else 0
    return out


def measure(rows: Iterable[Mapping[str, Any]], *, agent: str, model: str) -> Measured | None:
    """Means over journal rows of finished, answered runs of ``agent`` and ``model``."""
    n = calls = inp = cached = out = lat = 0.0
    for row in rows:
        if row.get("agent") != agent or row.get("model") != model or row.get("error_kind"):
            continue
        steps = _number(row.get("n_steps"))
        if steps <= 0:
            continue
        n += 1
        calls += steps
        inp += _number(row.get("input_tokens"))
        cached += _number(row.get("cached_input_tokens"))
        out += _number(row.get("output_tokens"))
        lat += _number(row.get("latency_s"))
    if not n:
        return None
    return Measured(int(n), calls / n, inp / calls, cached / calls, out / calls, lat / calls)


def _number(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) and number >= 0 else 0.0


def settings_endpoint(settings: Mapping[str, Any]) -> str:
    """The endpoint a result set's ``settings.json`` says its runs called: ``endpoint`` (recorded since
    endpoints are), else its ``base_url``, else the provider's own API (``OPENAI_BASE_URL`` was not read
    before endpoints were recorded)."""
    recorded = settings.get("endpoint") or public_url(str(settings.get("base_url") or ""))
    return str(recorded or PROVIDER_BASE_URLS.get(str(settings.get("provider") or "openai"), "")).rstrip("/")


def calibration_sources(journals_dir: Path, exp: Experiment) -> list[Path]:
    """The result-set folders under ``journals_dir`` whose runs calibrate ``exp``: its own, and those
    whose ``settings.json`` names the same agent, model and endpoint (a rehearsal at a local server never
    calibrates the provider's) and, for a navigating agent, the same ``max_steps`` (calls per run follow
    it: 20-step runs do not calibrate a 5-step experiment). A folder without settings is not read: its
    endpoint is unknown."""
    own = exp.config_hash()
    steps = exp.max_steps if exp.agent in NAVIGATING else None
    out = []
    for folder in sorted(Path(journals_dir).glob("*/")):
        if folder.name != own:
            try:
                settings = json.loads((folder / "settings.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if not isinstance(settings, dict) or (
                settings.get("agent"),
                settings.get("model", ""),
                settings_endpoint(settings),
            ) != (exp.agent, exp.model, exp.endpoint):
                continue
            if steps is not None and settings.get("max_steps", steps) != steps:
                continue
        out.append(folder)
    return out


def journal_rows(folder: Path) -> Iterator[dict[str, Any]]:
    """Every parseable row of the journals in one result-set folder (not its reply stores); torn lines
    skipped."""
    for path in sorted(p for p in folder.glob("*.jsonl") if not p.name.endswith(REPLIES_SUFFIX)):
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if isinstance(row, dict):
                    yield row


def calibrate(journals_dir: Path, exp: Experiment) -> Measured | None:
    """``measure`` over the finished runs of ``calibration_sources``; ``Measured.sources`` names each
    folder used and how many of its runs counted."""
    folders = calibration_sources(journals_dir, exp)
    per_folder = {f.name: measure(journal_rows(f), agent=exp.agent, model=exp.model) for f in folders}
    used = {name: m for name, m in per_folder.items() if m is not None}
    if not used:
        return None
    every = measure(
        (row for f in folders if f.name in used for row in journal_rows(f)), agent=exp.agent, model=exp.model
    )
    return every and replace(every, sources=tuple((name, m.runs) for name, m in used.items()))


def estimate_experiment(
    exp: Experiment,
    items: Any,
    *,
    journals_dir: Path,
    prices: PriceTable,
    benchmarks: Iterable[str] | None = None,
    every_item: bool = False,
    journalled: bool = True,
) -> list[Estimate]:
    """One ``Estimate`` per benchmark of ``items`` (the ``benchmark_items`` frame).

    Items without a readable slide are left out (they cost nothing: no model call is made; counted in
    ``without_slide``) unless ``every_item`` (as if every slide were in place: the cost of the whole
    benchmark before the slides are fetched); runs the experiment's journal already holds for the
    current items are subtracted (unless not ``journalled``: questions read from a CSV alone, with no
    slide to tie a journalled run to); the journals' finished runs of the same agent and model, if any,
    calibrate the token and time model.
    """
    from giant_assets.runs.journal import Journal
    from giant_assets.runs.records import RETRYABLE

    wanted = set(benchmarks) if benchmarks else None
    measured = calibrate(journals_dir, exp) if exp.calls_model and not is_plugin(exp.agent) else None
    out = []
    for name, group in items.groupby("benchmark_name", sort=True):
        if wanted is not None and name not in wanted:
            continue
        group = sample_items(group, exp.item_sample)  # a path review's sample: only those items run
        readable = group[group["wsi_status"] == "ok"] if "wsi_status" in group and not every_item else group
        ids = readable["benchmark_id"].astype(str).tolist()
        # the item's fingerprint per id: a run journalled for another question or slide is still to do
        fps = (
            dict(zip(ids, readable["item_fingerprint"], strict=True))
            if "item_fingerprint" in readable
            else {}
        )
        journal = Journal(journals_dir / exp.config_hash() / f"{name}.jsonl")
        done = len(
            {
                (str(row.get("benchmark_id")), int(row.get("run_index", 0)))
                for row in journal.read().values()
                if journalled
                and str(row.get("benchmark_id")) in set(ids)
                and _same_item(row, fps.get(str(row.get("benchmark_id"))))
                and int(row.get("run_index", 0)) < exp.runs_per_item
                and not (exp.retry_failed and row.get("error_kind") in RETRYABLE)
            }
        )
        chars = float(readable["prompt"].astype(str).str.len().mean()) if len(readable) else 0.0
        one = estimate(
            exp,
            str(name),
            items=len(readable),
            runs_done=done,
            mean_prompt_chars=chars,
            prices=prices,
            measured=measured,
        )
        one.without_slide = len(group) - len(readable)
        if measured is None and exp.calls_model and not is_plugin(exp.agent):
            one.notes.append(
                f"no finished run of {exp.agent}/{exp.model} at {exp.endpoint} in the journals yet: the "
                "protocol's token model alone"
            )
        out.append(one)
    return out


def _same_item(row: dict[str, Any], fingerprint: str | None) -> bool:
    """A journal row answers the current item: same fingerprint, or either has none (an older row)."""
    stored = row.get("item_fingerprint")
    return stored is None or fingerprint is None or stored == fingerprint


def render(estimates: list[Estimate]) -> str:
    """A plain-text table of estimates with a total line."""
    header = (
        f"{'benchmark':<16} {'items':>5} {'runs to do':>10} {'model calls':>15} {'input Mtok':>13} "
        f"{'output Mtok':>13} {'USD':>17} {'USD batch':>17} {'hours':>11}"
    )
    lines = [header]
    total = None
    for e in estimates:
        lines.append(
            f"{e.benchmark_name:<16} {e.items:>5} {e.runs_pending:>10} {e.calls.fmt():>15} "
            f"{(e.input_tokens * 1e-6).fmt(1):>13} {(e.output_tokens * 1e-6).fmt(1):>13} "
            f"{e.usd.fmt(2, '$'):>17} {e.usd_batch.fmt(2, '$'):>17} {e.hours.fmt(1):>11}"
        )
        parts = (e.calls, e.input_tokens, e.output_tokens, e.usd, e.usd_batch, e.hours)
        total = parts if total is None else tuple(a + b for a, b in zip(total, parts, strict=True))
    if total is not None and len(estimates) > 1:
        calls, inp, out, usd, usd_b, hours = total
        runs = sum(e.runs_pending for e in estimates)
        items = sum(e.items for e in estimates)
        lines.append(
            f"{'total':<16} {items:>5} {runs:>10} {calls.fmt():>15} {(inp * 1e-6).fmt(1):>13} "
            f"{(out * 1e-6).fmt(1):>13} {usd.fmt(2, '$'):>17} {usd_b.fmt(2, '$'):>17} {hours.fmt(1):>11}"
        )
    notes = sorted({n for e in estimates for n in e.notes})
    return "\n".join(lines + [f"note: {n}" for n in notes])


def total_line(estimates: list[Estimate]) -> str:
    """USD (synchronous and batch) and hours of ``estimates`` together, as one phrase."""
    usd = sum((e.usd for e in estimates), Span(0.0, 0.0))
    usd_batch = sum((e.usd_batch for e in estimates), Span(0.0, 0.0))
    hours = sum((e.hours for e in estimates), Span(0.0, 0.0))
    items = sum(e.items for e in estimates)
    return f"{items} items, {usd.fmt(2, '$')} ({usd_batch.fmt(2, '$')} in batch mode), {hours.fmt(1)} hours"
