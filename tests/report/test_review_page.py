"""What the review page shows and how it is used, on a real slide and in Chromium: the question without
the platform's answer format, numbered options, the answer as the option's text (raw reply one click
away), readable region numbers, a layout fitting a 1366 x 768 laptop, keyboard ratings that save, and a
run whose slide is gone never shown."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from giant_assets.eval.reviews import ReviewFiles, add_reviewer, build_units, read_reviews, write_queue
from giant_assets.report.review.serve import serve_in_thread
from tests.report.browser import Browser, chromium_path
from tests.report.test_review_server import OVERVIEW, READY, SAVED, SLIDE

LAPTOP = {"width": 1366, "height": 768, "deviceScaleFactor": 1, "mobile": False}
OPTIONS = ["Lung", "Liver", "Kidney"]


def _units(files: ReviewFiles, slide: Path, gone: Path) -> list[dict]:
    items = pd.DataFrame(
        {
            "benchmark_name": "tcga_slidebench",
            "benchmark_id": ["0", "1"],
            "prompt_template": "Which organ is this?",
            "prompt": 'Which organ is this?\n\nOptions:\n1. Lung\n2. Liver\n3. Kidney\n\nReply {"answer": N}',
            "options": [OPTIONS, OPTIONS],
            "wsi_path": [str(slide), str(gone)],
            "width": 4096,
            "height": 3072,
        }  # fmt: skip
    )
    steps = [
        {"index": 0, "action": "crop", "box": [800, 800, 400, 400], "text": "a"},
        {"index": 1, "action": "crop", "box": [2850, 1760, 300, 480], "text": "b"},
    ]
    runs = pd.DataFrame(
        {
            "config_hash": "h",
            "model": "m",
            "benchmark_name": "tcga_slidebench",
            "benchmark_id": ["0", "1"],
            "run_index": 0,
            "truth_label": 2,
            "correct": True,
            "answer_text": '{"answer": 2}',
            "predicted_label": 2,
            "trajectory_json": json.dumps(steps),
        }  # fmt: skip
    )
    return build_units(files.secret(), "exp", runs, items)


def test_the_unit_shows_the_question_options_and_the_answer_as_text(tmp_path: Path) -> None:
    files = ReviewFiles(tmp_path / "reviews")
    shown = _units(files, tmp_path / "a.svs", tmp_path / "b.svs")[0]["shown"]
    assert shown["question"] == "Which organ is this?"
    assert shown["options"] == OPTIONS
    assert shown["answer"] == "2. Liver"
    assert shown["raw_answer"] == '{"answer": 2}'


@pytest.fixture
def laptop_review(tmp_path: Path, sample_wsi_root: Path):
    files = ReviewFiles(tmp_path / "reviews")
    write_queue(files, _units(files, sample_wsi_root / SLIDE, tmp_path / "gone.svs"))  # an old queue
    token = add_reviewer(files, "ana")
    server, _ = serve_in_thread(files)
    try:
        yield files, server.server_address[1], token
    finally:
        server.shutdown()
        server.server_close()


def _key(b: Browser, key: str) -> None:
    code = 13 if key == "Enter" else ord(key)
    for kind in ("keyDown", "keyUp"):
        event = {"type": kind, "key": key, "windowsVirtualKeyCode": code}
        if kind == "keyDown" and key != "Enter":
            event["text"] = key
        b.send("Input.dispatchKeyEvent", event)


def test_in_chromium_on_a_laptop_screen_keys_rate_and_save(laptop_review) -> None:
    files, port, token = laptop_review
    with Browser(chromium_path()) as b:
        b.send("Emulation.setDeviceMetricsOverride", LAPTOP)
        b.open(f"http://127.0.0.1:{port}/?token={token}")
        assert b.eval(READY) is True, b.problems()
        b.eval(OVERVIEW)
        assert b.eval("queue.length") == 1  # the run whose slide is gone never appears
        assert b.eval("document.getElementById('question').textContent") == "Which organ is this?"
        assert b.eval("[...document.querySelectorAll('#options li')].map(l => l.textContent)") == OPTIONS
        assert b.eval("document.getElementById('answer').textContent") == "2. Liver"
        assert b.eval("document.getElementById('raw-answer').textContent") == '{"answer": 2}'
        labels = "[...document.querySelectorAll('#overview-wrap .label')]"
        heights = b.eval(f"{labels}.map(l => l.getBoundingClientRect().height)")
        assert len(heights) == 2 and min(heights) >= 12  # screen pixels, whatever the slide's size
        bottoms = b.eval(
            "['answer-rating', 'supports-rating', 'next'].map(i => document.getElementById(i)"
            ".getBoundingClientRect().bottom).concat([document.querySelector('.region fieldset')"
            ".getBoundingClientRect().bottom, window.innerHeight, document.documentElement.scrollHeight])"
        )
        *fields, inner, scroll = bottoms
        assert max(fields) <= inner == 768 and scroll <= 768, bottoms
        for key in ("1", "3", "2", "1", "Enter"):  # region 1, region 2, answer, supports; save and next
            _key(b, key)
        assert b.eval(SAVED).startswith("saved"), b.problems()
    (record,) = read_reviews(files)[0]
    assert (record["regions"], record["answer"], record["supports"]) == (
        ["relevant", "not relevant"],
        "partly",
        "yes",
    )
