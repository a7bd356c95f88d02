"""bench_cost's batch-mode part: a full Table 1 reproduction priced four ways, and one benchmark run in
batch mode against the loopback batch APIs with a kill between rounds.

The reproduction is GIANT x1 (gpt5-giant), GIANT x5 (four more runs per item: run 0 is x1's), the
thumbnail and the patch baselines over the 934 MultiPathQA items, priced from the estimate's token model
(``giant_assets.agents.estimate``) at the low and high ends of its range: synchronous without prompt
caching (the baseline of this run), synchronous with caching, batch, and batch with caching. The batch
columns are the providers' published list-price discount (x0.5) applied to the same tokens: a price, not
a measurement. The target (batch <= 0.5x synchronous) is checked on a measurement instead: the same
GIANT runs once synchronously and once in batch mode against the loopback servers, each priced from the
tokens its replies billed (the batch run at batch prices, as ``attach`` sets them).
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from giant_assets.agents.estimate import estimate
from giant_assets.agents.giant import GiantAgent
from giant_assets.agents.pricing import load_price_table
from giant_assets.agents.providers import OpenAIResponsesModel
from giant_assets.agents.providers.batching import (
    BATCH_DISCOUNT,
    BatchPending,
    BatchRound,
    BatchStore,
    batch_client,
)
from giant_assets.demo.batch_api import BatchAPIServer
from giant_assets.demo.scripted import (
    RecordedRequest,
    Reply,
    ScriptedModelServer,
    answer_reply,
    crop_reply,
)
from giant_assets.experiments.spec import Experiment
from giant_assets.runs.agent_api import AgentItem
from giant_assets.slides.synthetic import ONE_LESION_DESIGN, write_pyramidal_slide
from tests.support.batching import answer_all

ITEMS = {"tcga": 221, "gtex": 191, "panda": 197, "tcga_slidebench": 197, "tcga_expert_vqa": 128}
PROMPT_CHARS = {"tcga": 1500, "gtex": 900, "panda": 700, "tcga_slidebench": 400, "tcga_expert_vqa": 400}
ROWS = {
    "gpt5-giant": ({"agent": "giant"}, 1),
    "gpt5-giant-x5 (runs 1-4)": ({"agent": "giant", "runs_per_item": 4}, 1),
    "gpt5-thumbnail": ({"agent": "thumbnail", "thumbnail_size": 1024}, 1),
    "gpt5-patch": ({"agent": "patch"}, 1),
}
TARGET = 0.5


def _usd(exp: Experiment, cached: bool) -> tuple[float, float]:
    prices = load_price_table()
    price = prices.lookup(exp.model)[1]
    low = high = 0.0
    for bench, n in ITEMS.items():
        e = estimate(exp, bench, items=n, mean_prompt_chars=PROMPT_CHARS[bench], prices=prices)
        c_low, c_high = (e.cached_tokens.low, e.cached_tokens.high) if cached else (0, 0)
        low += price.usd(int(e.input_tokens.low), int(e.output_tokens.low), int(c_low))
        high += price.usd(int(e.input_tokens.high), int(e.output_tokens.high), int(c_high))
    return low, high


def table1_reproduction() -> None:
    print("full Table 1 reproduction (934 items), USD low-high from the estimate's token model:")
    print(f"{'row':<26} {'sync, no cache':>20} {'sync, cached':>20} {'batch':>20} {'batch, cached':>20}")
    totals = [[0.0, 0.0] for _ in range(4)]
    for name, (fields, _) in ROWS.items():
        exp = Experiment(name="x", model="gpt-5", provider="openai", **fields)
        plain, cached = _usd(exp, False), _usd(exp, True)
        cells = [
            plain,
            cached,
            tuple(v * BATCH_DISCOUNT for v in plain),
            tuple(v * BATCH_DISCOUNT for v in cached),
        ]
        for total, cell in zip(totals, cells, strict=True):
            total[0] += cell[0]
            total[1] += cell[1]
        print(f"{name:<26} " + " ".join(f"{f'${lo:,.0f}-${hi:,.0f}':>20}" for lo, hi in cells))
    print(f"{'total':<26} " + " ".join(f"{f'${lo:,.0f}-${hi:,.0f}':>20}" for lo, hi in totals))
    base = totals[0]
    for label, (lo, hi) in zip(("sync, cached", "batch", "batch, cached"), totals[1:], strict=True):
        print(f"  {label}: {lo / base[0]:.2f}-{hi / base[1]:.2f} of synchronous without caching")
    print(f"  (batch columns: the list-price discount x{BATCH_DISCOUNT} on the same tokens, not measured)")


STEPS = 4


def _navigate(request: RecordedRequest) -> Reply:
    k = request.assistant_turns
    return crop_reply(128 * k, 64 * k, 1024, 1024) if k < STEPS - 1 else answer_reply("2")


def batch_rounds_demo(items: int = 24) -> None:
    """One benchmark's worth of GIANT runs in batch mode (detach), each pass a new process's view of the
    store; a 'kill' after every round: nothing is paid twice."""
    with tempfile.TemporaryDirectory() as tmp:
        slide = write_pyramidal_slide(Path(tmp) / "s.tiff", ONE_LESION_DESIGN, levels=4)
        work = [AgentItem("gtex", str(i), f"Which organ? (item {i})\n1. Lung\n2. Liver", None, str(slide))
                for i in range(items)]  # fmt: skip
        with ScriptedModelServer(rule=_navigate) as direct:
            chat = OpenAIResponsesModel("gpt-5", base_url=direct.openai_base_url, reasoning_effort="high")
            sync = asyncio.run(answer_all(GiantAgent(chat, max_steps=STEPS, image_size=1000), work, None))
        with ScriptedModelServer(rule=_navigate) as model, BatchAPIServer(model, polls_to_finish=2) as api:
            passes = 0
            while True:
                passes += 1
                chat = OpenAIResponsesModel("gpt-5", base_url=api.openai_base_url, reasoning_effort="high")
                chat.batch = BatchRound(batch_client(chat), BatchStore(Path(tmp) / "store"), mode="detach",
                                        log=lambda _: None)  # fmt: skip
                agent = GiantAgent(chat, max_steps=STEPS, image_size=1000)
                agent.prices = agent.prices.scaled(BATCH_DISCOUNT)  # as attach() sets it
                results = asyncio.run(answer_all(agent, work, chat.batch))
                if not any(isinstance(r, BatchPending) for r in results) or passes > 3 * STEPS:
                    break
            per_round = [len(b.lines) for b in api.batches.values()]
            twice = sum(n > 1 for n in api.answered.values())
    print(
        f"batch mode, {items} GIANT runs of {STEPS} model calls: "
        f"{len(per_round)} rounds of {per_round} requests, "
        f"{passes} materializations (each a fresh process's view of the store), "
        f"{sum(api.answered.values())} lines paid, {twice} paid twice; "
        f"all answered: {all(not isinstance(r, BatchPending) and r.error is None for r in results)}"
    )
    answered = [r for r in results if not isinstance(r, BatchPending)]
    tokens = (
        sum(a.input_tokens + a.output_tokens for a in answered),
        sum(a.input_tokens + a.output_tokens for a in sync),
    )
    ratio = sum(a.cost_usd for a in answered) / sum(a.cost_usd for a in sync)
    print(
        f"measured: the batch run billed {tokens[0]} tokens, the synchronous run of the same items "
        f"{tokens[1]}; cost ratio {ratio:.3f} (target batch <= {TARGET}x sync: "
        f"{'met' if round(ratio, 9) <= TARGET else 'MISSED'}; the loopback servers bill the same tokens "
        "either way, so this checks that batch mode pays batch prices on every billed token, "
        "not a provider's bill)"
    )
