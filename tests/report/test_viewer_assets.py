"""trajectory_pictures and trajectory_viewer on real materializations, then the site in headless Chromium.

The bundled sample (with a `<script>` in one question and a hostile benchmark id) is ingested, GIANT
navigates two benchmarks against a loopback scripted model whose text also carries a `<script>`, and
the two report assets draw the pictures and write the site: tcga_slidebench with every picture drawn up
front, panda with none (drawn by the served viewer on first visit). A second experiment, which always
answers option 1 at once, answers tcga_slidebench (pictures of the selected runs only), and
experiment_comparisons reads both. Chromium then loads the pages from file:// and from `giant-view`
on loopback, and the DOM is checked against the stored tables and the bytes the model server received.
"""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path
from urllib.parse import unquote
from urllib.request import urlopen

import pytest
from dagster import DagsterInstance, materialize

from giant_assets.core.settings import VIEWER_URL_ENV
from giant_assets.core.storage import ParquetStore
from giant_assets.demo.scripted import (
    RecordedRequest,
    Reply,
    ScriptedModelServer,
    answer_reply,
    crop_reply,
    demo_policy,
)
from giant_assets.multipathqa.sample import sample_csv_path, sample_regions_path
from giant_assets.platform.assets.ingest import benchmark_items, multipathqa_csv
from giant_assets.platform.assets.leaderboard import experiment_comparisons
from giant_assets.platform.assets.predictions import predictions
from giant_assets.platform.assets.report import trajectory_pictures, trajectory_viewer
from giant_assets.platform.assets.scores import item_predictions
from giant_assets.platform.partitions import EXPERIMENT, result_key
from giant_assets.platform.resources import ExperimentsResource
from giant_assets.report.viewer.pages import HIGH_AGREEMENT
from giant_assets.report.viewer.serve import serve_in_thread
from tests.report.browser import Browser, chromium_path, file_url
from tests.support.dagster_env import resources_for

pytestmark = pytest.mark.xdist_group("viewer")  # one worker builds the site once for all its tests

EXPERIMENT_NAME = "viewer-test"
OTHER = "viewer-test-b"  # answers option 1 at once, tcga_slidebench only
BENCHMARKS = ("tcga_slidebench", "panda")
RENDER = {"tcga_slidebench": "all", "panda": "none"}
KEY_ENV = "GIANT_TEST_VIEWER_KEY"
KEY = "sk-viewer-test-5b1e0c9dSECRET"
QUESTION_SCRIPT = "<script>window.pwned = 1</script>"
MODEL_SCRIPT = "<script>window.pwned = 2</script>"
HOSTILE_ID = "../<i>p0</i>"  # panda item 0 under a hostile id
SERVED_ELSEWHERE = "http://viewer.lab.example:9000/giant/"
CORNER = (0, 0, 300, 300)
ASSETS = [
    multipathqa_csv, benchmark_items, predictions, item_predictions, trajectory_pictures, trajectory_viewer
]  # fmt: skip
VIEWPORT = {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False}


def corner_then_answer(request: RecordedRequest) -> Reply:
    """Look at a corner (saying something hostile), then answer as the demo model does; the other
    experiment's model answers option 1 straight away."""
    if (request.json or {}).get("model") == "scripted-other":
        return answer_reply("1", prose="Option one, at a glance.")
    if request.assistant_turns == 0:
        return crop_reply(*CORNER, prose=f"Start at the corner {MODEL_SCRIPT}.")
    return demo_policy(request)


def hostile_csv(path: Path) -> Path:
    with open(sample_csv_path(), newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        if (row["benchmark_name"], row["benchmark_id"]) == ("tcga_slidebench", "0"):
            row["prompt"] = row["prompt"].replace("in this slide?", f"in this slide {QUESTION_SCRIPT}?")
        if (row["benchmark_name"], row["benchmark_id"]) == ("panda", "0"):
            row["benchmark_id"] = HOSTILE_ID
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, sample_wsi_root: Path):
    base = tmp_path_factory.mktemp("viewer")
    data = base / "data"
    mp = pytest.MonkeyPatch()
    mp.setenv("GIANT_DATA_DIR", str(data))
    mp.setenv(KEY_ENV, KEY)
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(EXPERIMENT, [EXPERIMENT_NAME, OTHER])
    dataset = {
        "source": "local",
        "csv_path": str(hostile_csv(base / "multipathqa.csv")),
        "wsi_root": str(sample_wsi_root),
        "regions_path": str(sample_regions_path()),
    }
    results: dict[str, object] = {}
    mp.delenv(VIEWER_URL_ENV, raising=False)
    try:
        with ScriptedModelServer(rule=corner_then_answer) as server:
            experiments = base / "experiments.yaml"
            url = server.openai_base_url
            common = f"agent: giant, base_url: '{url}', api_key_env: {KEY_ENV}, runs_per_item: 2"
            experiments.write_text(
                f"experiments:\n  {EXPERIMENT_NAME}: {{{common}, model: scripted-viewer}}\n"
                f"  {OTHER}: {{{common}, model: scripted-other}}\n"
            )
            resources = resources_for(data, **dataset)
            resources["experiments"] = ExperimentsResource(path=str(experiments))
            assert materialize(ASSETS[:2], resources=resources, instance=instance).success
            cells = [(EXPERIMENT_NAME, b, RENDER[b]) for b in BENCHMARKS] + [
                (OTHER, BENCHMARKS[0], "selected")
            ]
            for experiment, benchmark, render in cells:
                if benchmark == "panda":  # its viewer is served elsewhere: the UI's link follows
                    mp.setenv(VIEWER_URL_ENV, SERVED_ELSEWHERE)
                else:
                    mp.delenv(VIEWER_URL_ENV, raising=False)
                key = result_key(experiment, benchmark)
                results[key] = materialize(
                    ASSETS,
                    selection=ASSETS[2:],
                    partition_key=key,
                    resources=resources,
                    instance=instance,
                    run_config={"ops": {"trajectory_pictures": {"config": {"render": render}}}},
                )
                assert results[key].success
            results["comparisons"] = materialize(
                [*ASSETS, experiment_comparisons],
                selection=[experiment_comparisons],
                resources=resources,
                instance=instance,
            )
            results["received"] = [b for r in server.requests for t in r.turns for b in t.images]
    finally:
        mp.undo()
    return data, results


def cell_key(benchmark: str, experiment: str = EXPERIMENT_NAME) -> str:
    return result_key(experiment, benchmark)


def metadata(result, node: str) -> dict:
    return {k: v.value for k, v in result.asset_materializations_for_node(node)[0].metadata.items()}


def stored(data: Path, table: str, experiment: str = EXPERIMENT_NAME, benchmark: str = BENCHMARKS[0]):
    return ParquetStore(data).read(table, [f"{experiment}/{benchmark}"])


def recorded_digests(runs) -> dict[tuple[str, int, int], str]:
    """(benchmark_id, run, step) -> the SHA-256 the trajectory recorded for the image that step sent."""
    out = {}
    for run in runs.itertuples():
        for step in json.loads(run.trajectory_json or "[]"):
            for digest in step.get("image_sha256") or []:
                out[(str(run.benchmark_id), int(run.run_index), int(step["index"]))] = digest
    return out


def test_pictures_are_the_images_sent_and_only_the_runs_asked_for(built) -> None:
    data, results = built
    received = {hashlib.sha256(b).hexdigest() for b in results["received"]}  # what the model server got
    # tcga_slidebench, render all: every run that saw its slide has a map, then each image it was sent
    runs = stored(data, "predictions")
    pictures = stored(data, "trajectory_pictures")
    seen = runs[runs["error_kind"].fillna("") != "slide_unavailable"]
    assert len(pictures[pictures["kind"] == "overview"]) == len(seen) > 0
    sent = pictures[pictures["kind"].isin(["thumbnail", "crop"])]
    assert len(sent) == 2 * len(seen)  # the overview as sent (with guides) and the corner crop
    digests = recorded_digests(runs)
    for pic in sent.itertuples():
        path = Path(pic.path)
        on_disk = hashlib.sha256(path.read_bytes()).hexdigest()
        assert on_disk == pic.sha256 == digests[(pic.benchmark_id, pic.run_index, pic.step)] and pic.verified
        assert on_disk in received and path.suffix == ".jpg"
        assert path.resolve().is_relative_to((data / "trajectories").resolve())
    assert set(pictures["experiment"]) == {EXPERIMENT_NAME}
    meta = metadata(results[cell_key("tcga_slidebench")], "trajectory_pictures")
    assert meta["pictures"] == len(pictures) and meta["runs_drawn"] == len(seen) and meta["render"] == "all"
    assert meta["preview"].count("data:image/jpeg;base64,") == 2  # the map and its crop as sent
    # panda, render none: nothing drawn now
    assert len(stored(data, "trajectory_pictures", benchmark="panda")) == 0
    assert metadata(results[cell_key("panda")], "trajectory_pictures")["runs_drawn"] == 0
    # the other experiment, render selected: exactly the runs of the items it got wrong (its runs agree)
    voted = stored(data, "item_predictions", OTHER)
    wrong = set(voted[~voted["correct"].astype(bool) & voted["slide_available"].astype(bool)]["benchmark_id"])
    other = stored(data, "trajectory_pictures", OTHER)
    assert 0 < len(wrong) < len(voted)
    assert set(other[other["kind"] == "overview"]["benchmark_id"]) == wrong
    counted = ParquetStore(data).query("select count(*) n from trajectory_pictures")["n"].iloc[0]
    assert counted == len(pictures) + len(other)


def test_viewer_metadata_links_the_index_and_previews_escaped_rows(built) -> None:
    data, results = built
    index = data / "viewer" / EXPERIMENT_NAME / "index.html"
    meta = metadata(results[cell_key("panda")], "trajectory_viewer")
    assert meta["index"] == f"{SERVED_ELSEWHERE}{EXPERIMENT_NAME}/index.html"  # GIANT_VIEWER_URL
    assert meta["index_path"] == str(index) and index.is_file()
    assert VIEWER_URL_ENV in meta["how_to_open"] and "make view" in meta["how_to_open"]
    default = metadata(results[cell_key("tcga_slidebench")], "trajectory_viewer")["index"]
    assert default == f"http://127.0.0.1:8765/{EXPERIMENT_NAME}/index.html"  # what `make view` serves
    assert meta["items_in_index"] == 6 and meta["item_pages"] == 3
    assert meta["pages_drawn_on_first_visit"] == 2  # render none: panda's two items with a slide
    assert (
        metadata(results[cell_key("tcga_slidebench")], "trajectory_viewer")["pages_drawn_on_first_visit"] == 0
    )
    first = metadata(results[cell_key("tcga_slidebench")], "trajectory_viewer")["preview"]
    assert "&lt;script&gt;" in first and "<script>" not in first
    for path in (data / "viewer").rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
            assert path.resolve().is_relative_to((data / "viewer").resolve())


@pytest.fixture(scope="module")
def browser():
    with Browser(chromium_path()) as b:
        b.send("Emulation.setDeviceMetricsOverride", VIEWPORT)
        yield b


def visible_rows(browser: Browser) -> list[dict]:
    return browser.eval(
        "[...document.querySelectorAll('#items tbody tr')].filter(r => !r.hidden).map(r => ({"
        "benchmark: r.dataset.benchmark, id: r.dataset.id, outcome: r.dataset.outcome,"
        "errors: r.dataset.errors, cost: Number(r.dataset.cost), steps: Number(r.dataset.steps),"
        "href: r.querySelector('a').href}))"
    )


def choose(browser: Browser, select: str, value: str) -> None:
    browser.eval(
        f"(() => {{ const s = document.getElementById({select!r}); s.value = {value!r};"
        " s.dispatchEvent(new Event('change')); })()"
    )


def test_the_metadata_link_opens_the_index_on_a_server_of_the_viewer_folder(built) -> None:
    data, results = built
    server, thread = serve_in_thread(data / "viewer")  # what `make view` runs
    try:
        link = metadata(results[cell_key("panda")], "trajectory_viewer")["index"]
        served = f"http://127.0.0.1:{server.server_address[1]}/" + link.removeprefix(SERVED_ELSEWHERE)
        with urlopen(served, timeout=10) as response:  # noqa: S310 (loopback)
            page = response.read()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    assert page == (data / "viewer" / EXPERIMENT_NAME / "index.html").read_bytes()


def test_index_in_chromium_lists_filters_and_sorts_the_items(built, browser: Browser) -> None:
    data, _ = built
    browser.open(file_url(data / "viewer" / EXPERIMENT_NAME / "index.html"))
    rows = visible_rows(browser)
    assert [r["benchmark"] for r in rows] == ["panda"] * 3 + ["tcga_slidebench"] * 3
    assert browser.eval("document.getElementById('shown').textContent") == "6 of 6 shown"
    choose(browser, "filter-benchmark", "panda")
    assert {r["benchmark"] for r in visible_rows(browser)} == {"panda"} and len(visible_rows(browser)) == 3
    choose(browser, "filter-error", "slide_unavailable")
    unavailable = visible_rows(browser)
    assert len(unavailable) == 1 and unavailable[0]["outcome"] == "unscored"
    assert browser.eval("document.getElementById('shown').textContent") == "1 of 6 shown"
    choose(browser, "filter-benchmark", "")
    choose(browser, "filter-error", "")
    choose(browser, "filter-outcome", "wrong")
    wrong = visible_rows(browser)
    assert wrong and {r["outcome"] for r in wrong} == {"wrong"}
    assert len(wrong) == sum(r["outcome"] == "wrong" for r in rows)
    choose(browser, "filter-outcome", "")
    choose(browser, "sort", "steps:asc")
    steps = [r["steps"] for r in visible_rows(browser)]
    assert steps == sorted(steps) and steps[0] == 0  # the unavailable slide's runs took no step
    for href in {r["href"] for r in rows}:
        assert Path(unquote(href.removeprefix("file://"))).is_file(), href
    assert browser.eval("typeof window.pwned") == "undefined"
    assert browser.problems() == []


def confidently_wrong(data: Path, benchmark: str) -> set[str]:
    """The oracle: a wrong vote that at least HIGH_AGREEMENT of two or more runs gave."""
    runs, voted = (
        stored(data, "predictions", benchmark=benchmark),
        stored(data, "item_predictions", benchmark=benchmark),
    )
    out = set()
    for vote in voted.itertuples():
        labels = runs[runs["benchmark_id"] == vote.benchmark_id]["predicted_label"].tolist()
        agree = sum(label == vote.predicted_label for label in labels)
        if (
            vote.slide_available
            and not vote.correct
            and len(labels) >= 2
            and agree >= HIGH_AGREEMENT * len(labels)
        ):
            out.add(vote.benchmark_id)
    return out


def test_index_filters_confidently_wrong_and_experiments_disagree(built, browser: Browser) -> None:
    data, _ = built
    browser.open(file_url(data / "viewer" / EXPERIMENT_NAME / "index.html"))
    choose(browser, "filter-flag", "confident")
    expected = {("panda", i) for i in confidently_wrong(data, "panda")}
    expected |= {("tcga_slidebench", i) for i in confidently_wrong(data, "tcga_slidebench")}
    assert expected and {(r["benchmark"], r["id"]) for r in visible_rows(browser)} == expected
    # experiments disagree: the two experiments' voted answers differ (both saw the slide)
    mine, other = stored(data, "item_predictions"), stored(data, "item_predictions", OTHER)
    joined = mine.merge(other, on="benchmark_id", suffixes=("", "_b"))
    joined = joined[joined["slide_available"].astype(bool)]
    differ = set(joined[joined["predicted_label"] != joined["predicted_label_b"]]["benchmark_id"])
    choose(browser, "filter-flag", "disagree")
    assert differ and {(r["benchmark"], r["id"]) for r in visible_rows(browser)} == {
        ("tcga_slidebench", i) for i in differ
    }
    assert browser.problems() == []


def test_item_page_in_chromium_puts_the_verdict_first_and_shows_the_images_sent(
    built, browser: Browser
) -> None:
    data, results = built
    page = data / "viewer" / EXPERIMENT_NAME / "tcga_slidebench" / "0" / "index.html"
    browser.open(file_url(page))
    # the verdict is the first screen: truth, voted answer, agreement and each run's answer above the fold
    verdict = browser.eval(
        "(() => { const v = document.getElementById('verdict').getBoundingClientRect();"
        " return [v.top, v.bottom, window.innerHeight]; })()"
    )
    assert 0 < verdict[0] < verdict[1] <= verdict[2] == VIEWPORT["height"]
    assert browser.eval(
        "!!(document.getElementById('verdict').compareDocumentPosition(document.getElementById('question'))"
        " & Node.DOCUMENT_POSITION_FOLLOWING)"
    )
    assert browser.eval("document.getElementById('question').closest('details').open") is False
    runs = stored(data, "predictions")
    runs = runs[runs["benchmark_id"] == "0"].sort_values("run_index")
    answers = browser.eval(
        "[...document.querySelectorAll('#run-answers td.answer')].map(td => td.textContent)"
    )
    assert [a.split(" · ")[0] for a in answers] == [str(int(v)) for v in runs["predicted_label"]]
    vote = stored(data, "item_predictions").set_index("benchmark_id").loc["0"]
    assert browser.eval("document.getElementById('voted').textContent").startswith(
        str(int(vote.predicted_label))
    )
    assert browser.eval("document.getElementById('agreement').textContent").startswith("2 of 2 runs")
    # every image as sent: decoded, captioned with its digest, which matches the one recorded
    images = browser.eval("[...document.images].map(i => [i.complete, i.naturalWidth, i.naturalHeight])")
    assert len(images) == 6  # two runs: the map, the overview as sent and one crop each
    assert all(done and w > 0 and h > 0 for done, w, h in images)
    captions = browser.eval(
        "[...document.querySelectorAll('figcaption.check')].map(c => [c.className, c.title])"
    )
    digests = recorded_digests(runs)
    expected = sorted(v for (i, _, _), v in digests.items() if i == "0")
    assert sorted(title.removeprefix("sha256 ") for _, title in captions) == expected and len(expected) == 4
    assert {cls for cls, _ in captions} == {"check verified"}
    srcs = browser.eval("[...document.querySelectorAll('figure.sent img')].map(i => i.src)")
    received = {hashlib.sha256(b).hexdigest() for b in results["received"]}
    assert all(
        hashlib.sha256(Path(unquote(s.removeprefix("file://"))).read_bytes()).hexdigest() in received
        for s in srcs
    )
    # hostile text stays text
    assert QUESTION_SCRIPT in browser.eval("document.getElementById('question').textContent")
    texts = browser.eval("[...document.querySelectorAll('details.text pre')].map(p => p.textContent)")
    assert any(MODEL_SCRIPT in t for t in texts)
    assert browser.eval("document.scripts.length") == 1 and browser.eval("typeof window.pwned") == "undefined"
    assert browser.eval("document.querySelectorAll('section.run').length") == 2
    assert browser.eval("document.querySelectorAll('.final').length") == 2
    assert browser.eval("document.querySelectorAll('.references li').length") == 1
    assert browser.problems() == []


def test_cross_experiment_page_sets_every_experiment_side_by_side(built, browser: Browser) -> None:
    data, results = built
    browser.open(file_url(data / "viewer" / EXPERIMENT_NAME / "tcga_slidebench" / "0" / "index.html"))
    browser.open(browser.eval("document.getElementById('cross-link').href"))
    rows = browser.eval(
        "[...document.querySelectorAll('#experiments tbody tr')].map(r => [r.dataset.experiment,"
        " r.querySelector('.voted').textContent, r.dataset.outcome, Number(r.cells[6].textContent),"
        " r.querySelector('a').href])"
    )
    assert [r[0] for r in rows] == [EXPERIMENT_NAME, OTHER]
    votes = []
    for name, voted, outcome, steps, href in rows:
        vote = stored(data, "item_predictions", name).set_index("benchmark_id").loc["0"]
        runs = stored(data, "predictions", name)
        assert voted.startswith(str(int(vote.predicted_label))) and outcome == (
            "correct" if vote.correct else "wrong"
        )
        assert steps == runs[runs["benchmark_id"] == "0"]["n_steps"].sum()
        assert Path(unquote(href.removeprefix("file://"))).is_file()
        votes.append(int(vote.predicted_label))
    assert browser.eval("!!document.getElementById('disagree')") == (votes[0] != votes[1])
    # experiment_comparisons links the cross page of every item on which the two disagree
    meta = metadata(results["comparisons"], "experiment_comparisons")
    mine, other = stored(data, "item_predictions"), stored(data, "item_predictions", OTHER)
    joined = mine.merge(other, on="benchmark_id", suffixes=("", "_b"))
    differ = joined[
        joined["slide_available"].astype(bool) & (joined["predicted_label"] != joined["predicted_label_b"])
    ]
    assert meta["disagreeing_items"] == len(differ) > 0
    for benchmark_id in differ["benchmark_id"]:
        assert f"/_items/tcga_slidebench/{benchmark_id}/index.html)" in meta["disagreements"]
    assert browser.problems() == []


def test_served_viewer_draws_a_pages_pictures_on_first_visit(built, browser: Browser) -> None:
    data, _ = built
    site = data / "viewer" / EXPERIMENT_NAME
    pending = [p.parent for p in (site / "panda").glob("*/render.json")]
    assert len(pending) == 2  # panda's two items with a slide; none drawn by the asset
    assert "not drawn yet" in (pending[0] / "index.html").read_text()
    server, thread = serve_in_thread(data / "viewer")
    try:
        port = server.server_address[1]
        browser.open(f"http://127.0.0.1:{port}/{EXPERIMENT_NAME}/index.html")
        target = next(r["href"] for r in visible_rows(browser) if "%253Ci%253E" in r["href"])  # hostile id
        browser.open(target)  # the first visit draws the page's pictures (browser's own timeout bounds it)
        assert browser.eval("document.querySelector('.item-id').textContent") == HOSTILE_ID
        images = browser.eval(  # the pictures drawn (not deep zoom's own buttons)
            "[...document.images].filter(i => !i.closest('.deepzoom')).map(i => [i.complete, i.naturalWidth])"
        )
        assert len(images) == 6 and all(done and w > 0 for done, w in images)
        classes = browser.eval("[...document.querySelectorAll('figcaption.check')].map(c => c.className)")
        assert classes == ["check verified"] * 4
        page_dir = next(p for p in pending if "%3Ci%3E" in p.name)
        assert not (page_dir / "render.json").exists() and (page_dir / "run0" / "overview.png").is_file()
        drawn = (page_dir / "index.html").stat().st_mtime_ns
        browser.open(target)  # a second visit serves the page as drawn
        assert (page_dir / "index.html").stat().st_mtime_ns == drawn
        assert (pending[0] if pending[0] != page_dir else pending[1]).joinpath("render.json").exists()
        assert browser.problems() == []
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
