"""Deep zoom in Chromium, one browser for every check: the viewer's item page over ``giant-view`` loads
tiles as it is panned and zoomed, and a crop's overlay lies on the crop's pixels in a screenshot (a
generated slide with a coloured mark at a known level-0 box); a click on it shows the step as sent; a
path review's reported region is drawn R1 where its box is, and a click shows its text."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator

import numpy as np
import pytest
from PIL import Image

from giant_assets.report.trajectory_images import write_pictures
from giant_assets.report.viewer import item_pages, write_benchmark
from giant_assets.report.viewer.pages import reported_by_run
from giant_assets.report.viewer.serve import serve_in_thread
from giant_assets.slides.synthetic import Blob, SlideDesign
from tests.report.browser import Browser, chromium_path, require_openseadragon
from tests.report.test_review_server import SAVED
from tests.report.test_viewer_site import frames
from tests.support.slides import write_pyramidal_slide

MARK_COLOR = (20, 190, 60)
MARK = Blob(1900, 1300, 160, 110, MARK_COLOR)  # level-0 box [1740, 1190, 320, 220]
DESIGN = SlideDesign(3200, 2400, lesions=(MARK,), texture=False)
BACKGROUND = np.array((242, 242, 242))
SCREEN = (1200, 900)
COLOR_TOL = 40  # per channel, after JPEG tiles and canvas scaling
REPORTED_BOX = [200.0, 300.0, 600.0, 400.0]  # a path review's reported region, away from the mark


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    require_openseadragon()
    with Browser(chromium_path()) as b:
        b.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": SCREEN[0], "height": SCREEN[1], "deviceScaleFactor": 1, "mobile": False},
        )
        yield b


@pytest.fixture(scope="module")
def viewer_page(tmp_path_factory) -> Iterator[tuple[str, object]]:
    """(URL of an item page whose run 0 cropped exactly the mark, the running server)."""
    tmp = tmp_path_factory.mktemp("dzview")
    slide = write_pyramidal_slide(tmp / "mark.tiff", DESIGN, levels=3)
    runs, voted, items = frames("tcga", ["m"], slide)
    steps = [
        {"index": 0, "action": "thumbnail", "text": "An overview."},
        {"index": 1, "action": "crop", "box": MARK.box_xywh, "level": 0, "text": "MARK-TEXT green blob"},
        {"index": 2, "action": "answer", "text": "Answer: 1"},
    ]
    runs = runs[runs.run_index == 0].assign(trajectory_json=json.dumps(steps), error_kind=None, error=None)
    pictures = write_pictures(runs, items, tmp / "trajectories", workers=1)
    reported = [{"benchmark_name": "tcga", "benchmark_id": "m", "run_index": 0, "box": REPORTED_BOX,
                 "finding": "REPORTED-TEXT pale corner"}]  # fmt: skip
    pages = item_pages(runs, voted, items, pictures, None, reported_by_run(reported))
    site = write_benchmark(tmp / "viewer" / "exp-1", "tcga", pages)
    server, thread = serve_in_thread(tmp / "viewer")
    host, port = server.server_address[:2]
    try:
        yield f"http://{host}:{port}/" + site.pages[0].relative_to(tmp / "viewer").as_posix(), server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def _settled(b: Browser, viewer: str) -> None:
    """Wait until the viewer stopped moving and drew every tile it needs."""
    b.eval(
        f"new Promise((done) => {{ const v = {viewer}; let n = 0; const tick = () => {{"
        " const item = v.world.getItemAt(0);"
        " const still = Math.abs(v.viewport.getZoom(false) - v.viewport.getZoom(true)) < 1e-6;"
        " if ((item && item.getFullyLoaded() && still) || ++n > 400) done(n);"
        " else setTimeout(tick, 25); }; tick(); })"
    )
    time.sleep(0.2)  # one more frame painted


def _mark_rect(b: Browser, viewer: str) -> dict:
    """The mark's level-0 box on screen (CSS px), by OpenSeadragon's own conversion, and the overlay's."""
    x, y, w, h = MARK.box_xywh
    return b.eval(
        f"(() => {{ const v = {viewer}; const O = OpenSeadragon;"
        f" const a = v.viewport.imageToViewerElementCoordinates(new O.Point({x}, {y}));"
        f" const z = v.viewport.imageToViewerElementCoordinates(new O.Point({x + w}, {y + h}));"
        " const e = v.element.getBoundingClientRect();"
        " const o = v.element.querySelector('.dz-box[data-step]').getBoundingClientRect();"
        " return {x0: e.left + a.x, y0: e.top + a.y, x1: e.left + z.x, y1: e.top + z.y,"
        "         overlay: [o.left, o.top, o.right, o.bottom]}; })()"
    )


def _assert_mark_under(b: Browser, rect: dict) -> None:
    shot = np.asarray(Image.open(io.BytesIO(b.screenshot(*SCREEN))).convert("RGB")).astype(int)
    cx, cy = (rect["x0"] + rect["x1"]) / 2, (rect["y0"] + rect["y1"]) / 2
    rx, ry = (rect["x1"] - rect["x0"]) / 2, (rect["y1"] - rect["y0"]) / 2
    inside = [(cx, cy), (cx - 0.7 * rx, cy), (cx + 0.7 * rx, cy), (cx, cy - 0.7 * ry), (cx, cy + 0.7 * ry)]
    outside = [(cx - rx - 12, cy), (cx + rx + 12, cy), (cx, cy - ry - 12), (cx, cy + ry + 12)]
    for px, py in inside:
        assert np.abs(shot[round(py), round(px)] - MARK_COLOR).max() < COLOR_TOL, (px, py)
    for px, py in outside:
        assert np.abs(shot[round(py), round(px)] - BACKGROUND).max() < COLOR_TOL, (px, py)
    assert rect["overlay"] == pytest.approx([rect["x0"], rect["y0"], rect["x1"], rect["y1"]], abs=1.5)


def _click_for_step_panel(b: Browser, x: float, y: float) -> dict:
    """A left click at (x, y) on the page, then the step panel once shown (at most ~5 s): hidden, text and
    the source of its crop picture ('' without one)."""
    for kind in ("mousePressed", "mouseReleased"):
        b.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1})
    return b.eval(
        "new Promise((done) => { let n = 0; const t = () => {"
        " const p = document.querySelector('.step-panel');"
        " if (!p.hidden || ++n > 200) done({hidden: p.hidden, text: p.textContent,"
        " img: (p.querySelector('img.crop') || {}).src || ''}); else setTimeout(t, 25); }; t(); })"
    )


def _open_deep_zoom(b: Browser, url: str) -> str:
    """The viewer page at ``url`` opened, its deep zoom scrolled into view and settled; returns the page's
    expression for its OpenSeadragon viewer."""
    viewer = "document.querySelector('.deepzoom').giantViewer"
    b.open(url)
    b.eval("document.querySelector('.deepzoom').scrollIntoView()")
    b.eval(f"new Promise((done) => {{ const t = () => ({viewer}) ? done(1) : setTimeout(t, 25); t(); }})")
    _settled(b, viewer)
    return viewer


def test_the_viewer_page_zooms_over_tiles_and_its_crop_overlay_lies_on_the_crop(browser, viewer_page):
    url, server = viewer_page
    b, viewer = browser, _open_deep_zoom(browser, url)
    home_tiles, home_reads = b.eval(f"{viewer}.giantTiles"), server.tiles.reads
    assert home_tiles > 0 and home_reads > 0
    _assert_mark_under(b, _mark_rect(b, viewer))
    # zoom in 6x onto the mark, then pan a little: new, finer tiles are requested and drawn
    b.eval(f"(() => {{ const v = {viewer}; const c = v.viewport.imageToViewportCoordinates(1900, 1300);"
           " v.viewport.zoomBy(6, c, true); v.viewport.panTo(c, true); })()")  # fmt: skip
    _settled(b, viewer)
    assert b.eval(f"{viewer}.giantTiles") > home_tiles and server.tiles.reads > home_reads
    rect = _mark_rect(b, viewer)
    assert rect["x1"] - rect["x0"] > 3 * 320 * (SCREEN[0] / 3200) * 0.9  # really zoomed in
    _assert_mark_under(b, rect)
    # a click on the crop shows the step: its picture and the model's text
    cx, cy = (rect["x0"] + rect["x1"]) / 2, (rect["y0"] + rect["y1"]) / 2
    panel = _click_for_step_panel(b, cx, cy)
    assert not panel["hidden"] and "MARK-TEXT green blob" in panel["text"]
    assert panel["img"].endswith("/run0/step1.png")
    assert b.problems() == []


# --- the review page ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def review_page(tmp_path_factory) -> Iterator[tuple[str, object, object]]:
    """(the reviewer's first link, the server, the review files) over one unit that cropped the mark."""
    import pandas as pd

    from giant_assets.eval.reviews import ReviewFiles, add_reviewer, build_units, write_queue
    from giant_assets.report.review.serve import serve_in_thread as serve_review

    tmp = tmp_path_factory.mktemp("dzreview")
    slide = write_pyramidal_slide(tmp / "mark.tiff", DESIGN, levels=3)
    files = ReviewFiles(tmp / "reviews")
    items = pd.DataFrame({"benchmark_name": "tcga", "benchmark_id": ["0"], "prompt": "Q?",
                          "wsi_path": str(slide), "width": 3200, "height": 2400})  # fmt: skip
    steps = [{"index": 0, "action": "crop", "box": MARK.box_xywh, "text": "the mark"}]
    runs = pd.DataFrame({"config_hash": "h", "model": "m", "benchmark_name": "tcga", "benchmark_id": ["0"],
                         "run_index": 0, "truth_label": 1, "correct": True, "answer_text": "Answer: 1",
                         "predicted_label": 1, "trajectory_json": json.dumps(steps)})  # fmt: skip
    write_queue(files, build_units(files.secret(), "exp", runs, items))
    token = add_reviewer(files, "ana")
    server, _ = serve_review(files)
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/?token={token}", server, files
    finally:
        server.shutdown()
        server.server_close()


def _drag_level0(b: Browser, start: tuple[float, float], end: tuple[float, float]) -> None:
    """A real mouse drag on the review's deep zoom between two level-0 points."""
    points = b.eval(
        "(() => { const e = zoom.element.getBoundingClientRect(); return"
        f" [{list(start)}, {list(end)}].map(([x, y]) => {{ const p ="
        " zoom.viewport.imageToViewerElementCoordinates(new OpenSeadragon.Point(x, y));"
        " return [e.left + p.x, e.top + p.y]; }); })()"
    )
    (x0, y0), (x1, y1) = points
    press = {"button": "left", "clickCount": 1}
    for event in (
        {"type": "mouseMoved", "x": x0, "y": y0},
        {"type": "mousePressed", "x": x0, "y": y0, **press},
        {"type": "mouseMoved", "x": (x0 + x1) / 2, "y": (y0 + y1) / 2, "buttons": 1},
        {"type": "mouseMoved", "x": x1, "y": y1, "buttons": 1},
        {"type": "mouseReleased", "x": x1, "y": y1, **press},
    ):
        b.send("Input.dispatchMouseEvent", event)


def _review_ready(b: Browser) -> None:
    b.eval(
        "new Promise((done) => { let n = 0; const t = () => {"
        " const ok = typeof zoom !== 'undefined' && zoom && zoom.world.getItemCount() > 0"
        "   && document.querySelectorAll('#osd .dz-crop').length > 0;"
        " if (ok || ++n > 400) done(ok); else setTimeout(t, 25); }; t(); })"
    )
    _settled(b, "zoom")


def test_the_review_page_draws_edits_deletes_saves_and_reloads_on_the_deep_zoom(browser, review_page):
    url, server, files = review_page
    from giant_assets.eval.reviews import read_reviews

    b = browser
    b.open(url)
    _review_ready(b)
    assert b.eval("document.getElementById('overview-wrap').hidden") is True
    assert server.tiles.reads > 0  # the page's tile requests carried the reviewer's cookie
    rect = b.eval(
        "(() => { const o = document.querySelector('#osd .dz-crop').getBoundingClientRect();"
        " const e = zoom.element.getBoundingClientRect();"
        " const at = (x, y) => zoom.viewport.imageToViewerElementCoordinates(new OpenSeadragon.Point(x, y));"
        f" const a = at({MARK.cx - MARK.rx}, {MARK.cy - MARK.ry});"
        f" const z = at({MARK.cx + MARK.rx}, {MARK.cy + MARK.ry});"
        " return {x0: e.left + a.x, y0: e.top + a.y, x1: e.left + z.x, y1: e.top + z.y,"
        " overlay: [o.left, o.top, o.right, o.bottom]}; })()"
    )
    _assert_mark_under(b, rect)  # the viewed region lies on the crop's pixels
    b.eval("document.getElementById('draw-mode').click(); true")
    _drag_level0(b, (400, 300), (1200, 900))
    _close(b.eval("drawn"), [[400, 300, 800, 600]])
    b.eval("document.querySelector('#drawn-list .redraw').click(); true")  # edit: draw it again
    _drag_level0(b, (2400, 1600), (2800, 2000))
    _close(b.eval("drawn"), [[2400, 1600, 400, 400]])
    b.eval("document.getElementById('draw-mode').click(); true")
    _drag_level0(b, (100, 100), (300, 200))
    _close(b.eval("drawn"), [[2400, 1600, 400, 400], [100, 100, 200, 100]])
    assert b.eval("document.querySelectorAll('#osd .dz-drawn').length") == 2
    b.eval("document.querySelectorAll('#drawn-list .delete')[1].click(); true")  # delete the second
    b.eval("document.getElementById('submit').click(); true")
    assert b.eval(SAVED).startswith("saved"), b.problems()
    (record,) = read_reviews(files)[0]
    _close(record["drawn"], [[2400, 1600, 400, 400]])
    since = len(b.events)
    b.send("Page.reload")
    b.wait_for("Page.loadEventFired", since)
    _review_ready(b)
    _close(b.eval("drawn"), record["drawn"])
    assert b.eval("document.querySelectorAll('#osd .dz-drawn').length") == 1
    assert b.eval("document.querySelectorAll('#drawn-list li').length") == 1
    assert b.problems() == []  # nothing the Content-Security-Policy refused, no failed load


def _close(got: list, expected: list, tol: float = 8.0) -> bool:
    """Boxes equal within ``tol`` level-0 pixels (a screen pixel is ~2.7 level-0 pixels here)."""
    assert len(got) == len(expected), got
    for g, e in zip(got, expected, strict=True):
        assert g == pytest.approx(e, abs=tol), got
    return True


def test_a_reported_region_is_outlined_where_its_box_is_and_a_click_shows_its_text(browser, viewer_page):
    url, _ = viewer_page
    b, viewer = browser, _open_deep_zoom(browser, url)
    x, y, w, h = REPORTED_BOX
    rect = b.eval(
        f"(() => {{ const v = {viewer}; const O = OpenSeadragon;"
        f" const a = v.viewport.imageToViewerElementCoordinates(new O.Point({x}, {y}));"
        f" const z = v.viewport.imageToViewerElementCoordinates(new O.Point({x + w}, {y + h}));"
        " const e = v.element.getBoundingClientRect(); const d = v.element.querySelector('.dz-reported');"
        " const o = d.getBoundingClientRect();"
        " return {box: [e.left + a.x, e.top + a.y, e.left + z.x, e.top + z.y],"
        "         overlay: [o.left, o.top, o.right, o.bottom], label: d.textContent,"
        "         color: getComputedStyle(d).borderTopColor,"
        "         path: v.element.querySelectorAll('.dz-path').length}; })()"
    )
    assert rect["overlay"] == pytest.approx(rect["box"], abs=1.5)
    assert (rect["label"], rect["color"], rect["path"]) == ("R1", "rgb(255, 140, 0)", 0)  # one crop: no path
    cx, cy = (rect["box"][0] + rect["box"][2]) / 2, (rect["box"][1] + rect["box"][3]) / 2
    panel = _click_for_step_panel(b, cx, cy)
    assert not panel["hidden"] and "R1" in panel["text"] and "REPORTED-TEXT pale corner" in panel["text"]
    assert b.problems() == []


def test_without_openseadragon_both_pages_show_the_overview_and_say_how_to_get_deep_zoom(
    browser, viewer_page, review_page, tmp_path, monkeypatch
) -> None:
    from giant_assets.report import vendor

    monkeypatch.setattr(vendor, "VENDOR_DIR", tmp_path)  # as on a clone where make has not run
    b = browser
    b.send("Network.setCacheDisabled", {"cacheDisabled": True})  # the earlier tests cached OpenSeadragon
    b.open(viewer_page[0])
    hint = (
        "new Promise((done) => { let n = 0; const t = () => {"
        " const p = document.querySelector('.deepzoom-hint, #deepzoom-hint:not(:empty)');"
        " if ((p && !p.hidden) || ++n > 200) done(p && !p.hidden ? p.textContent : null);"
        " else setTimeout(t, 25); }; t(); })"
    )
    assert "run make" in b.eval(hint)
    assert b.eval("[...document.querySelectorAll('.deepzoom')].every((z) => z.hidden)") is True
    assert b.eval("document.querySelector('figure.overview img').naturalWidth") > 0
    b.open(review_page[0])
    assert "run make" in b.eval(hint)
    assert b.eval("document.getElementById('deepzoom').hidden") is True
    assert b.eval(
        "new Promise((done) => { const i = document.getElementById('overview'); let n = 0; const t = () =>"
        " (i.naturalWidth > 0 || ++n > 200) ? done(!document.getElementById('overview-wrap').hidden"
        " && i.naturalWidth > 0) : setTimeout(t, 25); t(); })"
    )
