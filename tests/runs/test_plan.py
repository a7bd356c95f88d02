"""The plan's reuse rules: by item fingerprint; legacy rows adopted or set aside; unreadable slides keep
the answers to their question only."""

from __future__ import annotations

import json

from giant_assets.runs.journal import row_key
from giant_assets.runs.plan import legacy_matches, plan_runs
from giant_assets.runs.records import SLIDE_UNAVAILABLE

IDENTITY = {"config_hash": "h", "agent": "giant", "model": "m"}


def item(bid: str, *, fp: str, q: str, truth: int = 2, slide: bool = True, size=(4096, 3072)) -> dict:
    return {
        "benchmark_name": "tcga_expert_vqa",
        "benchmark_id": bid,
        "truth_label": truth,
        "options": ["a", "b", "c", "d"],
        "item_fingerprint": fp,
        "question_fingerprint": q,
        "wsi_status": "ok" if slide else "missing",
        "wsi_path": f"/wsi/{bid}.svs" if slide else None,
        "wsi_error": None if slide else "slide not found",
        "width": size[0] if slide else None,
        "height": size[1] if slide else None,
    }


def stored(bid: str, *, fp: str | None, q: str | None, truth: int = 2, label: int = 2, **extra) -> dict:
    row = IDENTITY | {
        "benchmark_name": "tcga_expert_vqa",
        "benchmark_id": bid,
        "run_index": 0,
        "truth_label": truth,
        "predicted_label": label,
        "correct": label == truth,
        "error_kind": None,
        "answer_text": f'{{"answer": {label}}}',
        "finished_at": "2026-01-01T00:00:00+00:00",
        "trajectory_json": json.dumps([{"index": 0, "action": "thumbnail", "box": [0, 0, 4096, 3072]}]),
    }
    if fp is not None:
        row |= {"item_fingerprint": fp, "question_fingerprint": q}
    return row | extra


def plan(items: list[dict], rows: list[dict]):
    return plan_runs(
        items,
        identity=IDENTITY,
        runs_per_item=1,
        done={row_key(r): r for r in rows},
        retry_failed=True,
        unavailable_row=lambda base, it, reason: base | {"error_kind": SLIDE_UNAVAILABLE, "error": reason},
    )


def test_only_the_same_fingerprint_is_reused():
    items = [item("0", fp="A", q="qa"), item("1", fp="B", q="qb")]
    out = plan(items, [stored("0", fp="A", q="qa"), stored("1", fp="B-old-slide", q="qb")])
    assert out.reused == 1 and [base["benchmark_id"] for base, _ in out.pending] == ["1"]
    assert out.pending[0][0]["item_fingerprint"] == "B" and out.set_aside == 0


def test_legacy_rows_need_the_same_truth_and_slide_size():
    same = stored("0", fp=None, q=None)
    assert legacy_matches(same, item("0", fp="A", q="qa"))
    assert not legacy_matches(same, item("0", fp="A", q="qa", truth=3))
    assert not legacy_matches(same, item("0", fp="A", q="qa", size=(2048, 1536)))
    assert not legacy_matches(stored("0", fp=None, q=None, label=15), item("0", fp="A", q="qa"))  # 4 options
    out = plan(
        [item("0", fp="A", q="qa"), item("1", fp="B", q="qb", size=(1000, 800))],
        [same, stored("1", fp=None, q=None), stored("9", fp=None, q=None)],  # 9: no longer an item
    )
    assert out.reused == 1 and [a["benchmark_id"] for a in out.adopted] == ["0"]
    assert out.adopted[0]["item_fingerprint"] == "A" and out.adopted[0]["answer_text"] == same["answer_text"]
    assert out.set_aside == 2 and [base["benchmark_id"] for base, _ in out.pending] == ["1"]


def test_unreadable_slide_keeps_answers_to_the_same_question_only():
    rows = [
        stored("0", fp="A", q="qa", truth=2, label=3),
        stored("1", fp="B", q="qb-before-the-csv-changed"),
        stored("2", fp="C", q="qc", error_kind="agent_error", predicted_label=None),
    ]
    questions = (("0", "qa"), ("1", "qb"), ("2", "qc"))
    items = [item(b, fp=f"{b}-no-slide", q=q, truth=3, slide=False) for b, q in questions]
    out = plan(items, rows)
    assert out.pending == [] and out.kept_unverified == 1
    kept, changed, failed = out.unavailable
    assert kept["slide_verified"] is False and kept["answer_text"] == '{"answer": 3}'
    assert kept["truth_label"] == 3 and kept["correct"] is True  # scored against today's truth label
    assert changed["error_kind"] == failed["error_kind"] == SLIDE_UNAVAILABLE
