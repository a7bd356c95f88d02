"""The path review: its request (built-in, or imported from a clone's review script and sent verbatim),
its place in the config hash, and the strict parser of its reply (every malformed field named)."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import shapely

from giant_assets.agents.path_review import PathReviewAgent
from giant_assets.agents.pricing import ModelPrice, PriceTable
from giant_assets.agents.prompt_import import PATH_REVIEW_SCRIPT, main
from giant_assets.agents.registry import make_agent
from giant_assets.demo.scripted import Reply, ScriptedModelServer, answer_reply
from giant_assets.eval.path_review import best_overlaps, parse_review, review_frames
from giant_assets.experiments.prompts import BUILT_IN, PATH_REVIEW_PROMPT, load_prompt_file
from giant_assets.experiments.spec import Experiment
from giant_assets.runs.agent_api import AgentItem
from giant_assets.runs.records import steps_frame
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.agents.test_prompts import fixture_repo
from tests.support.slides import write_pyramidal_slide

# a review script in the released one's shape (our own text): a plain constant, never formatted, so
# its doubled braces reach the model as they are
REVIEW_SOURCE = '''\
raise SystemExit("never run")
REVIEW_PROMPT = """Fixture review. Reply {{"regions": [...], "answer": {{...}}}} in {w0} style."""
'''
SENT = 'Fixture review. Reply {{"regions": [...], "answer": {{...}}}} in {w0} style.'


def _region(n: int, **kw) -> dict:
    base = {
        "region_number": n,
        "bbox": {"x": 10 * n, "y": 20, "width": 100, "height": 50},
        "why_zoomed": "dense",
        "observations": "cells",
        "diagnostic_relevance": "tumour",
    }
    return base | kw


ANSWER = {"organ_type": "lung", "diagnosis": "adenocarcinoma", "confidence": "High", "key_findings": "glands"}


def _reply(regions: object, answer: object = ANSWER) -> str:
    doc = json.dumps({"regions": regions, "answer": answer})
    return f"<report>seen</report><response>```json\n{doc}\n```</response>"


def test_a_well_formed_review_parses_whole() -> None:
    review = parse_review(_reply([_region(n) for n in range(1, 6)]))
    assert review.parsed and review.problems == []
    assert [r.box for r in review.regions] == [(10.0 * n, 20.0, 100.0, 50.0) for n in range(1, 6)]
    assert review.answer == ANSWER | {"confidence": "high"}


@pytest.mark.parametrize(
    ("regions", "answer", "problems"),
    [
        ([_region(1)] * 4, ANSWER, ["regions: 5 expected, got 4"]),
        ("none", ANSWER, ["regions: must be a list of regions, got str"]),
        (
            [_region(1, bbox={"x": 1, "y": 2, "width": True, "height": 3})] + [_region(2)] * 4,
            ANSWER,
            ["regions[0].bbox.width: must be a number, got True"],
        ),
        (
            [_region(2)] * 4 + [_region(5, bbox={"x": -1, "y": 2, "width": 5, "height": 0})],
            ANSWER,
            ["regions[4].bbox.x: must be >= 0 (level-0 pixels), got -1"],
        ),
        (
            [_region(1, region_number="1", why_zoomed="")] + [_region(2)] * 4,
            ANSWER,
            [
                "regions[0].region_number: must be an integer, got '1'",
                "regions[0].why_zoomed: must be non-empty text, got ''",
            ],
        ),
        ([_region(1)] * 4 + ["x"], ANSWER, ["regions[4]: not an object (str)"]),
        (
            [_region(1)] * 5,
            ANSWER | {"confidence": "sure"},
            ["answer.confidence: must be one of high, medium, low, got 'sure'"],
        ),
        (
            [_region(1)] * 5,
            {"organ_type": "lung"},
            [
                "answer.diagnosis: must be non-empty text, got nothing",
                "answer.confidence: must be non-empty text, got nothing",
                "answer.key_findings: must be non-empty text, got nothing",
            ],
        ),  # fmt: skip
        ([_region(1)] * 5, None, ["answer: must be an object, got nothing"]),
    ],
)
def test_every_malformed_field_is_named(regions: object, answer: object, problems: list[str]) -> None:
    review = parse_review(_reply(regions, answer))
    assert review.problems == problems
    if isinstance(regions, list):
        assert len(review.regions) == len(regions)  # nothing dropped
        assert [r.problem is None for r in review.regions] == [
            not any(p.startswith(f"regions[{i}]") for p in problems) for i in range(len(regions))
        ]


def test_a_reply_without_the_review_json_says_so() -> None:
    review = parse_review('<response>{"isup_grade": 3}</response> and {"action": "crop"}')
    assert not review.parsed and review.problems == ["reply: no JSON object with 'regions' and 'answer'"]


def test_a_reply_too_long_for_the_scanned_tail_says_so_with_its_size_and_the_limit() -> None:
    """10,000 regions: the object starts before the last 64 KiB a reply is read in, so none is found
    there; the problem names the reply's size and the limit, not "no JSON object"."""
    text = _reply([_region(n) for n in range(1, 10_001)])
    assert len(text) > 1_000_000
    review = parse_review(text)
    assert not review.parsed
    assert review.problems == [
        f"reply: too long ({len(text):,} characters; a reply's JSON is read from its last 65,536 only): "
        "no complete JSON object with 'regions' and 'answer' there"
    ]
    # a reply just within the limit is read whole; one just over it whose object lies in the tail too
    fits = _reply([_region(n) for n in range(1, 6)])
    assert parse_review(fits + " " * (65_536 - len(fits))).parsed
    assert parse_review("x" * 70_000 + fits).parsed


def test_best_overlaps_agree_with_shapely() -> None:
    rng = np.random.default_rng(7)
    regions = rng.integers(0, 500, (6, 4)).astype(float) + [0, 0, 1, 1]
    crops = rng.integers(0, 500, (4, 4)).astype(float) + [0, 0, 1, 1]
    best, where = best_overlaps(regions, crops)

    def box(b):
        return shapely.box(b[0], b[1], b[0] + b[2], b[1] + b[3])

    for i, r in enumerate(regions):
        ious = [box(r).intersection(box(c)).area / box(r).union(box(c)).area for c in crops]
        assert best[i] == pytest.approx(max(ious), abs=1e-12)
        assert where[i] == (int(np.argmax(ious)) if max(ious) > 0 else -1)
    assert (best == 0).any() and (best > 0).any()  # both cases drawn
    assert best_overlaps(regions, np.zeros((0, 4)))[1].tolist() == [-1] * 6


def test_the_review_request_is_imported_verbatim_and_hashed(tmp_path: Path) -> None:
    repo = fixture_repo(tmp_path / "GIANT")
    (repo / "scripts").mkdir()
    (repo / PATH_REVIEW_SCRIPT).write_text(REVIEW_SOURCE)
    out = tmp_path / "official.yaml"
    assert main(["import", "--repo", str(repo), "--out", str(out)]) == 0
    imported = load_prompt_file(out)
    assert imported.review_request == SENT  # the official script sends it unformatted: braces as written
    assert (
        BUILT_IN.review_request == PATH_REVIEW_PROMPT.format() and "region_number" in BUILT_IN.review_request
    )
    # an unset path_review leaves the prompt set's hash as before the field existed
    assert BUILT_IN.sha256() == replace(BUILT_IN, path_review="").sha256() != imported.sha256()
    review = Experiment(name="r", agent="path_review", model="gpt-5")
    giant = review.model_copy(update={"agent": "giant"})
    assert "review_request_sha256" in review.answer_settings()
    assert "review_request_sha256" not in giant.answer_settings()
    assert review.model_copy(update={"prompt_file": str(out)}).config_hash() != review.config_hash()
    # without the script, the import still works and the built-in request stays
    (repo / PATH_REVIEW_SCRIPT).unlink()
    assert main(["import", "--repo", str(repo), "--out", str(out), "--force"]) == 0
    assert load_prompt_file(out).review_request == BUILT_IN.review_request


def test_the_agent_sends_the_imported_request_at_the_loopback_model(tmp_path: Path) -> None:
    repo = fixture_repo(tmp_path / "GIANT")
    (repo / "scripts").mkdir()
    (repo / PATH_REVIEW_SCRIPT).write_text(REVIEW_SOURCE)
    out = tmp_path / "official.yaml"
    assert main(["import", "--repo", str(repo), "--out", str(out)]) == 0
    slide = write_pyramidal_slide(tmp_path / "s.tiff", ONE_LESION_DESIGN, levels=4)
    reply = {"regions": [_region(n) for n in range(1, 6)], "answer": ANSWER}
    with ScriptedModelServer([Reply("z", crop=(0, 0, 1024, 1024)), answer_reply(reply)]) as srv:
        exp = Experiment(
            name="rev", agent="path_review", model="scripted-vlm", base_url=srv.openai_base_url,
            max_steps=4, prompt_file=str(out), reasoning_effort=None,
        )  # fmt: skip
        agent = make_agent(exp, pd.DataFrame(), None)
        assert isinstance(agent, PathReviewAgent)
        agent.prices = PriceTable({"scripted-vlm": ModelPrice(1.0, 1.0)})

        async def go():
            try:
                return await agent.answer(AgentItem("tcga", "1", "Which subtype?", ["a", "b"], str(slide)), 0)
            finally:
                await agent.aclose()

        ans = asyncio.run(go())
    assert ans.error is None and len(srv.requests) == 2
    first_user = next(t for t in srv.requests[0].turns if t.role == "user")
    assert first_user.texts == (SENT,) and len(first_user.images) == 1  # the question is not sent
    assert "Which subtype?" not in json.dumps(srv.requests[1].json)
    review = parse_review(ans.steps[-1].text)
    assert review.problems == [] and review.regions[0].box == (10.0, 20.0, 100.0, 50.0)


def test_the_declared_path_reviews_are_priced_like_giant() -> None:
    """gpt5-path-review makes GIANT's calls (the review request is about as long as a question)."""
    from giant_assets.agents.estimate import estimate
    from giant_assets.agents.pricing import load_price_table
    from giant_assets.experiments.declared import load_experiments

    declared = load_experiments(Path(__file__).resolve().parents[2] / "experiments.yaml")
    prices = load_price_table()
    review, giant = (
        estimate(declared[n], "tcga", items=25, prices=prices) for n in ("gpt5-path-review", "gpt5-giant")
    )
    assert review.priced and review.usd.high > 0 and review.batch_rounds == 20
    assert (review.calls.low, review.calls.high) == (giant.calls.low, giant.calls.high) == (250, 500)
    assert declared["claude-path-review"].agent == declared["demo-path-review"].agent == "path_review"
    assert all(declared[n].unbudgeted() is None for n in ("gpt5-path-review", "claude-path-review"))


def _steps_and_run(regions: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One run of two attempts on a 4000 x 3000 slide: the first viewed [0, 0, 100, 100] and failed, the
    answering second viewed [1000, 1000, 100, 50] and replied with ``regions``."""
    trajectory = [
        {"index": 0, "attempt": 1, "action": "thumbnail", "box": [0, 0, 4000, 3000]},
        {"index": 1, "attempt": 1, "action": "crop", "box": [0, 0, 100, 100], "text": "first try"},
        {"index": 2, "attempt": 2, "action": "thumbnail", "box": [0, 0, 4000, 3000]},
        {"index": 3, "attempt": 2, "action": "crop", "box": [1000, 1000, 100, 50], "text": "second"},
        {"index": 4, "attempt": 2, "action": "answer", "text": _reply(regions)},
    ]
    run = pd.DataFrame(
        {"config_hash": ["h"], "benchmark_name": ["tcga"], "benchmark_id": ["7"], "run_index": [0],
         "trajectory_json": [json.dumps(trajectory)]}
    )  # fmt: skip
    return steps_frame(run), run


def test_regions_are_checked_one_by_one_against_the_answering_attempt() -> None:
    box = lambda x, y, w, h: {"bbox": {"x": x, "y": y, "width": w, "height": h}}  # noqa: E731
    regions = [
        _region(1, **box(0, 0, 100, 100)),  # the first attempt's crop exactly: not viewed by the answer
        _region(2, **box(1000, 1000, 100, 100)),  # IoU with [1000, 1000, 100, 50] = 5000 / 10000 = 0.5
        _region(3, **box(1e12, 0, 100, 100)),  # finite, but far outside the slide
        _region(4, **box(1e200, 0, 100, 100)),  # beyond any coordinate
        _region(5, **box(10, 10, 0, 100)),  # zero width
    ]
    regions_frame, answers = review_frames(*_steps_and_run(regions))  # never raises for the cell
    rows = regions_frame.set_index("region_index")
    assert rows["valid"].tolist() == [True, True, False, False, False]
    assert rows.loc[0, "best_iou"] == 0 and not rows.loc[0, "viewed"]
    assert rows.loc[1, "best_iou"] == 0.5 and rows.loc[1, "viewed"] and rows.loc[1, "best_crop_step"] == 3
    problems = [
        "regions[2].bbox: reaches outside the slide (4000 x 3000), got x 1e+12, y 0, width 100, height 100",
        "regions[3].bbox.x: beyond +-1e+150, got 1e+200",
        "regions[4].bbox.width: must be positive, got 0",
    ]
    assert sorted(rows["problem"].dropna()) == sorted(problems)
    assert all(pd.isna(rows.loc[k, "viewed"]) and pd.isna(rows.loc[k, "best_iou"]) for k in (2, 3, 4))
    answer = answers.iloc[0]
    assert sorted(json.loads(answer.problems)) == sorted(problems)
    assert (answer.n_valid_regions, answer.n_crops, answer.n_regions_viewed) == (2, 1, 1)
    assert answer.share_regions_viewed == 0.5 and answer.mean_best_iou == 0.25


def test_a_region_of_400_digits_is_named_not_raised() -> None:
    review = parse_review(_reply([_region(1, bbox={"x": 10**400, "y": 0, "width": 5, "height": 5})]))
    assert review.problems[1:] == ["regions[0].bbox.x: beyond +-1e+150, got an integer of about 401 digits"]
