"""The cost and time estimate: its token model against a real trajectory, the journal, the CLI."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from dagster import DagsterInstance, materialize

from giant_assets.agents.estimate import _run_tokens, estimate, estimate_experiment, measure
from giant_assets.agents.giant import GiantAgent
from giant_assets.agents.pricing import experiment_prices, load_price_table
from giant_assets.agents.providers import OpenAIResponsesModel
from giant_assets.demo.scripted import (
    RecordedRequest,
    Reply,
    ScriptedModelServer,
    answer_reply,
    crop_reply,
)
from giant_assets.experiments.spec import Experiment
from giant_assets.platform import experiments_cli
from giant_assets.platform.assets.ingest import benchmark_items, multipathqa_csv
from giant_assets.runs.agent_api import AgentItem
from giant_assets.runs.journal import Journal
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.support.dagster_env import resources_for, write_experiments
from tests.support.slides import write_pyramidal_slide

PRICES = load_price_table()
GIANT = Experiment(name="g", agent="giant", provider="openai", model="gpt-5", max_steps=8)


def _items(**counts: int) -> pd.DataFrame:
    rows = [
        {"benchmark_name": b, "benchmark_id": str(i), "wsi_status": "ok", "prompt": "q" * 400}
        for b, n in counts.items()
        for i in range(n)
    ]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("keep", [None, 3])
def test_token_model_matches_a_real_trajectory_through_the_sdk(tmp_path: Path, keep: int | None) -> None:
    """The estimator's input and cached tokens for an n-call run agree with what a real GIANT run sends
    (the loopback server counts tokens by the providers' rules, including the cached prefix), with all
    images kept and with pruning (the overview and the newest ``keep - 1`` crops)."""
    steps = 8 if keep else 6

    def navigate(request: RecordedRequest) -> Reply:
        k = request.assistant_turns
        return crop_reply(100 * k, 50 * k, 2048, 2048) if k < steps - 1 else answer_reply("2")

    slide = write_pyramidal_slide(tmp_path / "s.tiff", ONE_LESION_DESIGN, levels=4)
    prompt = "Which organ is shown?\n" + "\n".join(f"{i}. Organ {i}" for i in range(1, 21))

    async def run(server: ScriptedModelServer):
        chat = OpenAIResponsesModel("gpt-5", base_url=server.openai_base_url, reasoning_effort="high")
        agent = GiantAgent(chat, max_steps=steps, image_size=1000, max_images_in_context=keep)
        try:
            return await agent.answer(AgentItem("gtex", "1", prompt, None, str(slide)), 0)
        finally:
            await agent.aclose()

    with ScriptedModelServer(rule=navigate) as server:
        answer = asyncio.run(run(server))
    assert answer.error is None and len(server.requests) == steps
    exp = replace_steps(steps).model_copy(update={"max_images_in_context": keep})
    model_in, model_cached = _run_tokens(exp, steps, len(prompt) / 4)
    assert model_in == pytest.approx(answer.input_tokens, rel=0.2)
    assert model_cached == pytest.approx(answer.cached_input_tokens, rel=0.25)
    if keep:  # measured 2026-11-24: 21,036 vs 20,908 input, 11,060 vs 10,786 cached (the model that
        # pruned the overview first was off by 16 % on each)
        assert model_in == pytest.approx(answer.input_tokens, rel=0.05)
        assert model_cached == pytest.approx(answer.cached_input_tokens, rel=0.05)


def replace_steps(steps: int) -> Experiment:
    return GIANT.model_copy(update={"max_steps": steps})


def test_ranges_scale_with_items_runs_and_reasoning_effort() -> None:
    one = estimate(GIANT, "tcga", items=10, prices=PRICES)
    assert one.calls.low == 10 * 4 and one.calls.high == 10 * 8  # T/2 to T calls per run
    x5 = estimate(GIANT.model_copy(update={"runs_per_item": 5}), "tcga", items=10, prices=PRICES)
    assert x5.usd.low == pytest.approx(5 * one.usd.low) and x5.usd.high == pytest.approx(5 * one.usd.high)
    low_effort = estimate(
        GIANT.model_copy(update={"reasoning_effort": "low"}), "tcga", items=10, prices=PRICES
    )
    assert low_effort.output_tokens.high < one.output_tokens.high
    assert one.usd_batch.low == pytest.approx(one.usd.low / 2) and one.usd.low < one.usd.high
    thumb = estimate(Experiment(name="t", agent="thumbnail", model="gpt-5"), "tcga", items=10, prices=PRICES)
    assert thumb.calls.low == thumb.calls.high == 10 and thumb.batch_rounds == 1
    assert one.batch_rounds == 8  # one batch round per GIANT step
    # time: 10 runs, 4 at once (concurrency 4), of 4-8 calls of 8-40 s (a reasoning model): 2.5 waves
    assert (one.hours.low, one.hours.high) == pytest.approx((2.5 * 4 * 8 / 3600, 2.5 * 8 * 40 / 3600))
    slow = estimate(GIANT.model_copy(update={"requests_per_minute": 1.0}), "tcga", items=10, prices=PRICES)
    assert slow.hours.low == pytest.approx(40 / 60)  # 40 calls at one a minute bound it instead
    # price arithmetic at the range's low end: gpt-5 list prices, from the token counts
    p = PRICES.lookup("gpt-5")[1]
    expected = p.usd(int(one.input_tokens.low), int(one.output_tokens.low), int(one.cached_tokens.low))
    assert one.usd.low == pytest.approx(expected)


def test_unknown_model_is_flagged_not_priced() -> None:
    """No price: the USD range is unknown (NaN, shown as such), never $0, and the note says how to price."""
    e = estimate(GIANT.model_copy(update={"model": "my-local-vlm"}), "tcga", items=3, prices=PRICES)
    assert not e.priced and math.isnan(e.usd.low) and math.isnan(e.usd_batch.high)
    assert e.usd.fmt(2, "$") == "unknown" and "no price for model 'my-local-vlm'" in e.notes[0]
    assert "GIANT_PRICES" in e.notes[0] and "prices field" in e.notes[0]
    priced = Experiment.model_validate(
        GIANT.model_dump()
        | {"model": "my-local-vlm", "prices": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}
    )
    e = estimate(priced, "tcga", items=3, prices=experiment_prices(priced, price_file=""))
    assert e.priced and e.usd.low == pytest.approx(
        (e.input_tokens.low + 2 * e.output_tokens.low) / 1e6, rel=1e-3
    )


def _row(bid: str, run: int, **kw) -> dict:
    base = {"config_hash": GIANT.config_hash(), "agent": "giant", "model": "gpt-5", "benchmark_name": "tcga"}
    return base | {"benchmark_id": bid, "run_index": run, "truth_label": 1} | kw


def test_journal_runs_are_subtracted_and_real_runs_calibrate(tmp_path: Path) -> None:
    journals = tmp_path / "journals"
    journal = Journal(journals / GIANT.config_hash() / "tcga.jsonl")
    journal.append(
        [
            _row(
                "0",
                0,
                n_steps=10,
                input_tokens=60_000,
                cached_input_tokens=30_000,
                output_tokens=20_000,
                latency_s=50.0,
                cost_usd=0.3,
            ),  # fmt: skip
            _row(
                "1",
                0,
                n_steps=6,
                input_tokens=30_000,
                cached_input_tokens=15_000,
                output_tokens=12_000,
                latency_s=30.0,
                cost_usd=0.2,
            ),  # fmt: skip
            _row("2", 0, error_kind="agent_error"),  # retryable: still to run
            _row("99", 0, n_steps=3),  # not a current item
        ]
    )
    other = journals / "another-result-set"  # another model's journals are not read (settings.json says)
    Journal(other / "tcga.jsonl").append([_row("0", 0, n_steps=40, input_tokens=1, output_tokens=1)])
    (other / "settings.json").write_text('{"agent": "giant", "model": "gpt-4o"}')
    items = _items(tcga=5, gtex=2)
    items.loc[items.index[-1], "wsi_status"] = "missing"
    by_bench = {
        e.benchmark_name: e for e in estimate_experiment(GIANT, items, journals_dir=journals, prices=PRICES)
    }
    tcga, gtex = by_bench["tcga"], by_bench["gtex"]
    assert (tcga.items, tcga.runs_done, tcga.runs_pending) == (5, 2, 3)
    assert gtex.items == 1  # the item without a slide makes no call
    measured = measure(journal.read().values(), agent="giant", model="gpt-5")
    assert measured.runs == 3 and measured.calls_per_run == pytest.approx(19 / 3)
    # calibrated: calls per run within +-25 % of the measured mean (8 calls per run)
    assert tcga.calls.low == pytest.approx(3 * 0.75 * 19 / 3) and tcga.measured_runs == 3


def test_cli_estimates_from_materialized_items(data_dir: Path, sample_wsi_root: Path, tmp_path: Path, capsys,
                                               monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    exps = write_experiments(tmp_path / "e.yaml", {"paid": {"agent": "giant", "model": "gpt-5"}})
    monkeypatch.setenv("GIANT_EXPERIMENTS", str(exps))
    assert experiments_cli.main(["estimate", "paid"]) == 1
    assert "materialize multipathqa_csv and benchmark_items first" in capsys.readouterr().err
    res = resources_for(data_dir, exps, wsi_root=str(sample_wsi_root))
    assert materialize(
        [multipathqa_csv, benchmark_items], resources=res, instance=DagsterInstance.ephemeral()
    ).success
    assert experiments_cli.main(["estimate", "paid", "--benchmark", "tcga"]) == 0
    out = capsys.readouterr().out.splitlines()
    tcga = next(line for line in out if line.startswith("tcga "))
    items = duckdb.connect(str(data_dir / "giant.duckdb"), read_only=True).sql(
        "select count(*) from benchmark_items where benchmark_name = 'tcga' and wsi_status = 'ok'"
    )
    readable = items.fetchone()[0]
    assert tcga.split()[1] == str(readable) and "$" in tcga
    # the sample's tcga questions without a readable slide are left out, and what they would cost is said
    every = duckdb.connect(str(data_dir / "giant.duckdb"), read_only=True).sql(
        "select count(*) from benchmark_items where benchmark_name = 'tcga'"
    )
    (n_all,) = every.fetchone()
    assert n_all > readable
    note = next(line for line in out if "no readable slide now" in line)
    assert note.startswith(f"note: {n_all - readable} question(s) have no readable slide now")
    low_now = float(tcga.split("$")[1].split("-")[0])
    low_all = float(note.split("with every slide in place: ")[1].split("$")[1].split("-")[0])
    assert f"in place: {n_all} items, $" in note and low_all > low_now  # more questions cost more
    # the real ingest of the bundled sample is named as such, with the way to price a full CSV
    assert out[-1].startswith("priced: the bundled 14-question sample (gtex 3, panda 3, tcga 3, ")
    assert out[-1].endswith(
        "`giant-experiments estimate NAME --csv PATH` prices a MultiPathQA CSV before any slide"
    )
    assert experiments_cli.main(["estimate", "nope"]) == 2
    capsys.readouterr()
    # an unknown benchmark, a missing or malformed price file: a clear error, no table, no traceback
    assert experiments_cli.main(["estimate", "paid", "--benchmark", "nope"]) == 2
    err = capsys.readouterr()
    assert err.err.startswith("error: --benchmark nope: not a benchmark of the items (one of: ")
    assert "tcga" in err.err and err.out == ""
    prices = tmp_path / "prices.yaml"
    for text, message in [
        (None, "price table file not found"),
        ("gpt-5: {input_per_mtok: 1.0, output_per_mtok: [\n", "not valid YAML"),
        ("gpt-5: cheap\n", "expected {input_per_mtok, output_per_mtok}"),
        ("[1, 2]\n", "expected a mapping of model -> prices"),
    ]:
        prices.unlink(missing_ok=True)
        if text is not None:
            prices.write_text(text)
        monkeypatch.setenv("GIANT_PRICES", str(prices))
        assert experiments_cli.main(["estimate", "paid"]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"error: GIANT_PRICES={prices}: ") and message in err, err


def test_runs_journalled_for_another_question_are_still_to_do(tmp_path: Path) -> None:
    """Only a journal row with the current item's fingerprint (or an older row without one) is done."""
    journals = tmp_path / "journals"
    Journal(journals / GIANT.config_hash() / "tcga.jsonl").append(
        [
            _row("0", 0, item_fingerprint="fp-0"),  # this question about this slide
            _row("0", 0),  # the same run, journalled before fingerprints: not counted twice
            _row("1", 0, item_fingerprint="fp-1-other-csv"),  # id 1 was another question
            _row("2", 0),  # older row without a fingerprint
        ]
    )
    items = _items(tcga=3).assign(item_fingerprint=["fp-0", "fp-1", "fp-2"])
    (tcga,) = estimate_experiment(GIANT, items, journals_dir=journals, prices=PRICES)
    assert tcga.runs_pending == 1


def test_the_iteration_scaling_estimate_grows_with_the_step_budget() -> None:
    """Calls per run are max_steps/2..max_steps, so calls and USD of the scaling experiments rise with
    the step budget; 1 step is one call per run (the single-step prompt, no tool)."""
    items = 10
    by_steps = {
        t: estimate(GIANT.model_copy(update={"max_steps": t}), "tcga", items=items, prices=PRICES)
        for t in (1, 5, 10, 15, 20, 25)
    }
    for t, e in by_steps.items():
        assert (e.calls.low, e.calls.high) == (items * max(1, -(-t // 2)), items * t)
        assert e.batch_rounds == t
    usd = [by_steps[t].usd for t in sorted(by_steps)]
    assert all(a.low < b.low and a.high < b.high for a, b in zip(usd, usd[1:], strict=False))


def test_runs_of_another_step_budget_do_not_calibrate(tmp_path: Path) -> None:
    """A 20-step result set's runs (19 calls each) say nothing of a 5-step experiment's calls."""
    journals = tmp_path / "journals"
    twenty = GIANT.model_copy(update={"max_steps": 20})
    folder = journals / twenty.config_hash()
    Journal(folder / "tcga.jsonl").append([_row("0", 0, n_steps=19, input_tokens=9, output_tokens=9)])
    (folder / "settings.json").write_text('{"agent": "giant", "model": "gpt-5", "max_steps": 20}')
    five = GIANT.model_copy(update={"max_steps": 5})
    [e5] = estimate_experiment(five, _items(tcga=4), journals_dir=journals, prices=PRICES)
    assert e5.measured_runs == 0 and (e5.calls.low, e5.calls.high) == (12, 20)
    [e20] = estimate_experiment(twenty, _items(tcga=4), journals_dir=journals, prices=PRICES)
    assert e20.runs_pending == 3  # item 0 is journalled
    assert e20.measured_runs == 1 and e20.calls.high == pytest.approx(3 * 19 * 1.25)


def test_a_path_review_sample_is_estimated_for_its_items_only(tmp_path: Path) -> None:
    """item_sample {n: 25}: a 40-item benchmark is estimated for 25 items, a 10-item one for all 10."""
    items = _items(gtex=40, tcga=10)
    items["row_number"] = range(len(items))
    items["image_path"] = [
        f"{b}-{i}.svs" for b, i in zip(items.benchmark_name, items.benchmark_id, strict=True)
    ]
    review = Experiment(name="r", agent="path_review", model="gpt-5", item_sample={"n": 25})
    got = {
        e.benchmark_name: e for e in estimate_experiment(review, items, journals_dir=tmp_path, prices=PRICES)
    }
    assert (got["gtex"].items, got["tcga"].items) == (25, 10)
    assert got["gtex"].runs_total == 25
    (whole,) = estimate_experiment(
        review.model_copy(update={"item_sample": None}), items[items.benchmark_name == "gtex"],
        journals_dir=tmp_path, prices=PRICES,
    )  # fmt: skip
    assert whole.items == 40
