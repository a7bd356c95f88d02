"""trajectory_pictures and trajectory_viewer on real materializations, then the site in headless Chromium.

The bundled sample (with a `<script>` in one question and a hostile benchmark id) is ingested, GIANT
navigates two benchmarks against a loopback scripted model whose text also carries a `<script>`, and
the two report assets draw the pictures and write the site. Chromium then loads the index and an item
page from file:// and the DOM is checked: rows, filters, sorting, images decoded, nothing executed,
no console errors.
"""

from __future__ import annotations

import csv
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from urllib.parse import unquote
from urllib.request import urlopen

import pytest
from dagster import DagsterInstance, materialize

from giant_assets.core.settings import VIEWER_URL_ENV
from giant_assets.core.storage import ParquetStore
from giant_assets.demo.scripted_model import (
    RecordedRequest,
    Reply,
    ScriptedModelServer,
    crop_reply,
    demo_policy,
)
from giant_assets.multipathqa.sample import sample_csv_path, sample_regions_path
from giant_assets.platform.assets.ingest import benchmark_items, multipathqa_csv
from giant_assets.platform.assets.predictions import predictions
from giant_assets.platform.assets.report import trajectory_pictures, trajectory_viewer
from giant_assets.platform.assets.scores import item_predictions
from giant_assets.platform.partitions import EXPERIMENT, result_key
from giant_assets.platform.resources import ExperimentsResource
from tests.report.browser import Browser, chromium_path, file_url
from tests.support.dagster_env import resources_for

pytestmark = pytest.mark.xdist_group("viewer")  # one worker builds the site once for all its tests

EXPERIMENT_NAME = "viewer-test"
BENCHMARKS = ("tcga_slidebench", "panda")
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


def corner_then_answer(request: RecordedRequest) -> Reply:
    """Look at a corner (saying something hostile), then answer as the demo model does."""
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
    instance.add_dynamic_partitions(EXPERIMENT, [EXPERIMENT_NAME])
    dataset = {
        "source": "local",
        "csv_path": str(hostile_csv(base / "multipathqa.csv")),
        "wsi_root": str(sample_wsi_root),
        "regions_path": str(sample_regions_path()),
    }
    results = {}
    mp.delenv(VIEWER_URL_ENV, raising=False)
    try:
        with ScriptedModelServer(rule=corner_then_answer) as server:
            experiments = base / "experiments.yaml"
            experiments.write_text(
                f"experiments:\n  {EXPERIMENT_NAME}:\n    agent: giant\n    model: scripted-viewer\n"
                f"    base_url: {server.openai_base_url}\n    api_key_env: {KEY_ENV}\n    runs_per_item: 2\n"
            )
            resources = resources_for(data, **dataset)
            resources["experiments"] = ExperimentsResource(path=str(experiments))
            assert materialize(ASSETS[:2], resources=resources, instance=instance).success
            for benchmark in BENCHMARKS:
                if benchmark == "panda":  # its viewer is served elsewhere: the UI's link follows
                    mp.setenv(VIEWER_URL_ENV, SERVED_ELSEWHERE)
                results[benchmark] = materialize(
                    ASSETS,
                    selection=ASSETS[2:],
                    partition_key=result_key(EXPERIMENT_NAME, benchmark),
                    resources=resources,
                    instance=instance,
                )
                assert results[benchmark].success
    finally:
        mp.undo()
    return data, results


def metadata(result, node: str) -> dict:
    return {k: v.value for k, v in result.asset_materializations_for_node(node)[0].metadata.items()}


def test_pictures_table_lists_every_file_drawn_for_every_run_that_saw_the_slide(built) -> None:
    data, results = built
    store = ParquetStore(data)
    for benchmark in BENCHMARKS:
        runs = store.read("predictions", [f"{EXPERIMENT_NAME}/{benchmark}"])
        pictures = store.read("trajectory_pictures", [f"{EXPERIMENT_NAME}/{benchmark}"])
        seen = runs[runs["error_kind"].fillna("") != "slide_unavailable"]
        overviews = pictures[pictures["kind"] == "overview"]
        assert len(overviews) == len(seen) > 0
        crops = pictures[pictures["kind"] == "crop"]
        assert len(crops) == len(seen)  # one corner crop per run
        assert set(pictures["experiment"]) == {EXPERIMENT_NAME}
        for path in map(Path, pictures["path"]):
            assert path.is_file() and path.resolve().is_relative_to((data / "trajectories").resolve())
        meta = metadata(results[benchmark], "trajectory_pictures")
        assert meta["pictures"] == len(pictures) and meta["runs_drawn"] == len(seen)
        assert meta["preview"].count("data:image/jpeg;base64,") == 2  # overview + its crop
    panda = store.read("trajectory_pictures", [f"{EXPERIMENT_NAME}/panda"])
    assert HOSTILE_ID in set(panda["benchmark_id"])
    counted = store.query("select count(*) n from trajectory_pictures")["n"].iloc[0]
    tables = [store.read("trajectory_pictures", [f"{EXPERIMENT_NAME}/{b}"]) for b in BENCHMARKS]
    assert counted == sum(map(len, tables))


def test_viewer_metadata_links_the_index_and_previews_escaped_rows(built) -> None:
    data, results = built
    index = data / "viewer" / EXPERIMENT_NAME / "index.html"
    meta = metadata(results["panda"], "trajectory_viewer")
    assert meta["index"] == f"{SERVED_ELSEWHERE}{EXPERIMENT_NAME}/index.html"  # GIANT_VIEWER_URL
    assert meta["index_path"] == str(index) and index.is_file()
    assert VIEWER_URL_ENV in meta["how_to_open"] and "make view" in meta["how_to_open"]
    default = metadata(results["tcga_slidebench"], "trajectory_viewer")["index"]
    assert default == f"http://127.0.0.1:8765/{EXPERIMENT_NAME}/index.html"  # what `make view` serves
    assert meta["items_in_index"] == 6 and meta["item_pages"] == 3
    first = metadata(results["tcga_slidebench"], "trajectory_viewer")["preview"]
    assert "&lt;script&gt;" in first and "<script>" not in first
    for path in (data / "viewer").rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
            assert path.resolve().is_relative_to((data / "viewer").resolve())


@pytest.fixture(scope="module")
def browser():
    with Browser(chromium_path()) as b:
        yield b


def visible_rows(browser: Browser) -> list[dict]:
    return browser.eval(
        "[...document.querySelectorAll('#items tbody tr')].filter(r => !r.hidden).map(r => ({"
        "benchmark: r.dataset.benchmark, outcome: r.dataset.outcome, errors: r.dataset.errors,"
        "cost: Number(r.dataset.cost), steps: Number(r.dataset.steps), href: r.querySelector('a').href}))"
    )


def choose(browser: Browser, select: str, value: str) -> None:
    browser.eval(
        f"(() => {{ const s = document.getElementById({select!r}); s.value = {value!r};"
        " s.dispatchEvent(new Event('change')); })()"
    )


def test_the_metadata_link_opens_the_index_on_a_server_of_the_viewer_folder(built) -> None:
    data, results = built
    handler = partial(SimpleHTTPRequestHandler, directory=str(data / "viewer"))
    with ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        Thread(target=server.serve_forever, daemon=True).start()
        try:
            link = metadata(results["panda"], "trajectory_viewer")["index"]
            served = f"http://127.0.0.1:{server.server_address[1]}/" + link.removeprefix(SERVED_ELSEWHERE)
            with urlopen(served, timeout=10) as response:  # noqa: S310 (loopback)
                page = response.read()
        finally:
            server.shutdown()
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


def test_item_page_in_chromium_shows_decoded_pictures_and_inert_hostile_text(built, browser: Browser) -> None:
    data, _ = built
    page = data / "viewer" / EXPERIMENT_NAME / "tcga_slidebench" / "0" / "index.html"
    browser.open(file_url(page))
    images = browser.eval("[...document.images].map(i => [i.complete, i.naturalWidth, i.naturalHeight])")
    assert len(images) == 4  # two runs: an overview and one crop each
    assert all(done and w > 0 and h > 0 for done, w, h in images)
    assert QUESTION_SCRIPT in browser.eval("document.getElementById('question').textContent")
    texts = browser.eval("[...document.querySelectorAll('details.text pre')].map(p => p.textContent)")
    assert any(MODEL_SCRIPT in t for t in texts)
    assert browser.eval("document.scripts.length") == 1 and browser.eval("typeof window.pwned") == "undefined"
    assert browser.eval("document.querySelectorAll('section.run').length") == 2
    assert browser.eval("document.querySelectorAll('.final').length") == 2
    assert browser.eval("document.querySelectorAll('.references li').length") == 1
    # the hostile id's page, reached from the index, opens from its encoded folder
    browser.open(file_url(data / "viewer" / EXPERIMENT_NAME / "index.html"))
    target = next(r["href"] for r in visible_rows(browser) if "%253Ci%253E" in r["href"])
    browser.open(target)
    assert browser.eval("document.querySelector('.item-id').textContent") == HOSTILE_ID
    assert all(w > 0 for w in browser.eval("[...document.images].map(i => i.naturalWidth)"))
    assert browser.problems() == []
