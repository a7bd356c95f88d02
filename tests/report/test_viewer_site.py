"""The static viewer's files, without a browser: one row and one page per item, links and pictures that
resolve, counts from the inputs, everything from the CSV or the model escaped, benchmarks built apart."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pandas as pd
import pytest

from giant_assets.report.trajectory_images import write_pictures
from giant_assets.report.viewer import item_pages, write_benchmark
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.report.browser import Browser, chromium_path, file_url
from tests.support.slides import write_pyramidal_slide

HOSTILE_QUESTION = 'Which? <script>window.pwned = 1</script><img src="x" onerror="window.pwned = 2">'
HOSTILE_TEXT = "</pre></details><script>window.pwned = 3</script> looks like <b>tumour</b>"
OPTIONS = ["Adenocarcinoma", "Squamous <cell> carcinoma", "Normal"]


class Tags(HTMLParser):
    """Every start tag with its attributes, and the page's text."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    def links(self, tag: str, attr: str) -> list[str]:
        return [a[attr] for t, a in self.tags if t == tag and a.get(attr)]


def steps(run: int) -> list[dict]:
    return [
        {"index": 0, "action": "thumbnail", "image_size": [1000, 750], "text": "I see tissue.",
         "input_tokens": 800, "output_tokens": 20, "cost_usd": 0.001, "latency_s": 1.5},
        {"index": 1, "action": "crop", "box": [2580, 920, 440, 360], "level": 1, "image_size": [1000, 818],
         "text": HOSTILE_TEXT, "reasoning": "The dark area <i>may</i> be a lesion.", "input_tokens": 1600,
         "output_tokens": 30, "cost_usd": 0.002, "latency_s": 2.0, "cached_input_tokens": 700,
         "attempt": 1, "requested_box": [2580, 920, 440, 400], "reasoning_tokens": 0, "tool_call_id": None,
         "future_field": {"nested": [1, 2]}},
        {"index": 2, "action": "answer", "text": f"Answer: {1 + run}", "input_tokens": 2400,
         "output_tokens": 10, "cost_usd": 0.003, "latency_s": 1.0, "report": "Dense <atypical> glands.",
         "response_tagged": False},
    ]  # fmt: skip


def frames(benchmark: str, ids: list[str], wsi: Path) -> tuple[pd.DataFrame, ...]:
    items = pd.DataFrame(
        [
            {
                "benchmark_name": benchmark,
                "benchmark_id": i,
                "prompt": HOSTILE_QUESTION if k == 0 else f"Q{k}",
                "options": OPTIONS,
                "truth_label": 1,
                "image_path": f"{i}.svs",
                "wsi_path": str(wsi),
            }
            for k, i in enumerate(ids)
        ]  # fmt: skip
    )
    runs = pd.DataFrame(
        [
            {
                "config_hash": "h",
                "benchmark_name": benchmark,
                "benchmark_id": i,
                "run_index": r,
                "answer_text": f"Answer: {1 + r}",
                "predicted_label": 1 + r,
                "extraction": "answer_prefix",
                "error_kind": "agent_error" if (k, r) == (1, 1) else None,
                "error": "HTTP 500 <from server>" if (k, r) == (1, 1) else None,
                "input_tokens": 4800,
                "output_tokens": 60,
                "cost_usd": 0.006,
                "latency_s": 4.5,
                "n_steps": 3,
                "trajectory_json": json.dumps(steps(r)),
            }
            for k, i in enumerate(ids)
            for r in range(2)
        ]  # fmt: skip
    ).astype({"predicted_label": "Int64"})
    voted = pd.DataFrame(
        [
            {
                "benchmark_name": benchmark,
                "benchmark_id": i,
                "predicted_label": 1 if k % 2 == 0 else 2,
                "correct": k % 2 == 0,
                "slide_available": True,
            }
            for k, i in enumerate(ids)
        ]  # fmt: skip
    ).astype({"predicted_label": "Int64"})
    return runs, voted, items


@pytest.fixture(scope="module")
def slide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pyramidal_slide(tmp_path_factory.mktemp("slide") / "one.tiff", ONE_LESION_DESIGN, levels=3)


def build(tmp_path: Path, slide: Path, benchmark: str, ids: list[str]):
    runs, voted, items = frames(benchmark, ids, slide)
    pictures = write_pictures(runs, items, tmp_path / "trajectories", workers=1)
    pages = item_pages(runs, voted, items, pictures)
    return write_benchmark(tmp_path / "viewer" / "exp-1", benchmark, pages)


def test_index_lists_every_item_with_its_numbers_and_links_that_resolve(tmp_path: Path, slide: Path) -> None:
    build(tmp_path, slide, "tcga", ["a", "b/../c", "d"])
    site = build(tmp_path, slide, "gtex", ["g1", "g2"])
    html = site.index.read_text()
    page = Tags(html)
    rows = [a for t, a in page.tags if t == "tr" and "data-benchmark" in a]
    assert [(r["data-benchmark"]) for r in rows] == ["tcga"] * 3 + ["gtex"] * 2
    assert [r["data-outcome"] for r in rows] == ["correct", "wrong", "correct", "correct", "wrong"]
    assert [r["data-errors"] for r in rows] == ["", "agent_error", "", "", "agent_error"]
    assert [float(r["data-cost"]) for r in rows] == pytest.approx([0.012] * 5)
    assert {r["data-steps"] for r in rows} == {"6"}
    counts = " ".join(" ".join(page.text).split())
    assert "5 items" in counts and "3 correct" in counts and "2 wrong" in counts and "2 with errors" in counts
    assert "10 runs, 30 steps" in counts and "accuracy over all items 60.0%" in counts and "$0.0600" in counts
    for href in {h for h in page.links("a", "href") if not h.startswith("..")}:
        assert (site.index.parent / unquote(href)).is_file(), href
    for src in page.links("link", "href") + page.links("script", "src"):
        assert src == "data:," or (site.index.parent / src).is_file(), src  # data:, no favicon request
    experiments = Tags((tmp_path / "viewer" / "index.html").read_text())
    assert experiments.links("a", "href") == ["exp-1/index.html"]


def test_item_page_shows_each_run_as_a_timeline_with_its_pictures(tmp_path: Path, slide: Path) -> None:
    site = build(tmp_path, slide, "tcga", ["a", "b/../c"])
    assert len(site.pages) == 2 and site.pictures == 2 * 2 * 2  # 2 items x 2 runs x (overview + crop)
    for path in site.pages:
        assert path.resolve().is_relative_to((tmp_path / "viewer" / "exp-1").resolve())
        page = Tags(path.read_text())
        images = page.links("img", "src")
        assert len(images) == 4 and all((path.parent / unquote(src)).is_file() for src in images)
        text = " ".join(" ".join(page.text).split())
        assert (
            "Run 0" in text and "Run 1" in text and "box [2580, 920, 440, 360]" in text and "level 1" in text
        )
        assert "1600 in / 30 out tokens" in text and "2.00 s" in text and "$0.0020" in text
        assert "truth 1 · Adenocarcinoma" in text and "extracted label: 2 · Squamous <cell> carcinoma" in text
        # fields this viewer has no special place for are still shown
        assert "cached_input_tokens 700" in text and "attempt 1" in text and "response_tagged False" in text
        assert 'future_field {"nested": [1, 2]}' in text and "(asked for [2580, 920, 440, 400])" in text
        assert "reasoning_tokens" not in text and "tool_call_id" not in text  # empty values are left out
        assert "report Dense <atypical> glands." in text
        finals = [a["class"] for t, a in page.tags if t == "div" and "final" in a.get("class", "")]
        assert finals == ["final correct", "final wrong"]
    failing = Tags(site.pages[1].read_text())
    assert "HTTP 500 <from server>" in " ".join(failing.text)


def test_everything_from_the_csv_or_the_model_is_escaped(tmp_path: Path, slide: Path) -> None:
    site = build(tmp_path, slide, "tcga", ["<b>id</b>", "x"])
    for path in [site.index, *site.pages]:
        html = path.read_text()
        page = Tags(html)
        scripts = [a["src"] for t, a in page.tags if t == "script"]
        # the viewer's own code, and on the index the cross-experiment summary of each benchmark
        summaries = ["../_items/tcga.js"] if path == site.index else []
        assert scripts == [*summaries, "static/viewer.js" if path == site.index else "../../static/viewer.js"]
        assert not [t for t, a in page.tags if any(k.startswith("on") for k in a)], path
        assert not [t for t, _ in page.tags if t == "i"], path
        for raw in ("<script>window.pwned", "<b>tumour</b>", "<i>may</i>", "<b>id</b>", "<cell>"):
            assert raw not in html, (path, raw)
    item = " ".join(Tags(site.pages[0].read_text()).text)
    assert HOSTILE_QUESTION in item and HOSTILE_TEXT in item and "<b>id</b>" in item
    assert "The dark area <i>may</i> be a lesion." in item


def test_rebuilding_a_benchmark_replaces_its_pages_and_keeps_the_others(tmp_path: Path, slide: Path) -> None:
    build(tmp_path, slide, "tcga", ["a", "b", "c"])
    build(tmp_path, slide, "gtex", ["g"])
    site = build(tmp_path, slide, "tcga", ["b"])
    rows = [a for t, a in Tags(site.index.read_text()).tags if t == "tr" and "data-benchmark" in a]
    assert [r["data-benchmark"] for r in rows] == ["tcga", "gtex"]
    assert sorted(p.name for p in (site.index.parent / "tcga").iterdir()) == ["b"]
    assert [r["benchmark_id"] for r in site.rows] == ["b", "g"]


def test_index_accuracy_counts_items_without_a_slide_as_wrong() -> None:
    from giant_assets.report.viewer.pages import index_counts

    row = {"errors": [], "n_runs": 1, "n_steps": 2, "cost_usd": 0.0}
    rows = [row | {"outcome": o} for o in ("correct", "wrong", "unscored", "correct")]
    counts = index_counts(rows)
    assert counts["accuracy_pct"] == 50.0 and counts["scored"] == 3 and counts["unscored"] == 1
    reviewed = [row | {"outcome": "wrong", "answers_question": False, "confidently_wrong": True}] * 3
    counts = index_counts(rows + reviewed)  # a path review's items: neither wrong nor in the accuracy
    assert counts["accuracy_pct"] == 50.0 and counts["wrong"] == 1 and counts["reviewed"] == 3
    assert counts["confidently_wrong"] == 0 and counts["items"] == 7
    assert index_counts(reviewed)["accuracy_pct"] is None


def test_cross_experiment_pages_take_rows_written_before_them(tmp_path: Path, slide: Path) -> None:
    """An experiment whose site predates the cross pages (index rows without vote or agreement) still
    shows beside one built now, and a vote unknown never counts as a disagreement."""
    legacy = tmp_path / "viewer" / "old-exp" / "_rows"
    legacy.mkdir(parents=True)
    row = {"benchmark": "tcga", "benchmark_id": "a", "question": "Q", "truth_text": "1 · Adenocarcinoma",
           "voted_text": "2 · Squamous", "outcome": "wrong", "n_runs": 1, "n_steps": 2, "cost_usd": 0.5,
           "errors": [], "href": "tcga/a/index.html"}  # fmt: skip
    (legacy / "tcga.json").write_text(json.dumps([row]))
    build(tmp_path, slide, "tcga", ["a"])
    page = Tags((tmp_path / "viewer" / "_items" / "tcga" / "a" / "index.html").read_text())
    experiments = [a["data-experiment"] for t, a in page.tags if t == "tr" and "data-experiment" in a]
    assert experiments == ["exp-1", "old-exp"]
    assert "2 · Squamous" in " ".join(page.text)
    summary = (tmp_path / "viewer" / "_items" / "tcga.js").read_text()
    assert json.loads(summary.rsplit(" = ", 1)[1].rstrip(";\n")) == {
        "a": {"disagree": False, "experiments": 2}
    }


def test_in_chromium_a_patch_baselines_page_shows_its_patches(tmp_path: Path, slide: Path) -> None:
    """A patch baseline's run: the map and each patch as a picture that loads (docs/viewer.md)."""
    runs, voted, items = frames("tcga", ["p"], slide)
    patches = [
        {"index": 0, "action": "patch", "box": [2580, 920, 440, 360], "level": 0, "text": "2"},
        {"index": 1, "action": "patch", "box": [100, 100, 300, 300], "level": 0, "text": "1"},
        {"index": 2, "action": "answer", "text": '{"answer": 2}; majority of 2 patch labels'},
    ]
    runs = runs.assign(trajectory_json=json.dumps(patches), error_kind=None, error=None)
    pictures = write_pictures(runs, items, tmp_path / "trajectories", workers=1)
    site = write_benchmark(tmp_path / "viewer" / "exp-1", "tcga", item_pages(runs, voted, items, pictures))
    with Browser(chromium_path()) as b:
        b.open(file_url(site.pages[0]))
        loaded = b.eval(
            "new Promise((done) => { const imgs = [...document.images]; let n = 0; const tick = () => {"
            " if (imgs.every((i) => i.complete) || ++n > 200) done(imgs.map((i) => i.naturalWidth));"
            " else setTimeout(tick, 25); }; tick(); })"
        )
    assert len(loaded) == 2 * 3 and min(loaded) > 0  # 2 runs x (the map + 2 patches), every one loaded
