"""Deep zoom in Chromium, one browser for every check: the viewer's item page over ``giant-view`` loads
tiles as it is panned and zoomed, and a crop's overlay lies on the crop's pixels in a screenshot (a
generated slide with a coloured mark at a known level-0 box); a click on it shows the step as sent."""

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
from giant_assets.report.viewer.serve import serve_in_thread
from giant_assets.slides.synthetic import Blob, SlideDesign, write_pyramidal_slide
from tests.report.browser import Browser, chromium_path, require_openseadragon
from tests.report.test_viewer_site import frames

MARK_COLOR = (20, 190, 60)
MARK = Blob(1900, 1300, 160, 110, MARK_COLOR)  # level-0 box [1740, 1190, 320, 220]
DESIGN = SlideDesign(3200, 2400, lesions=(MARK,), texture=False)
BACKGROUND = np.array((242, 242, 242))
SCREEN = (1200, 900)
COLOR_TOL = 40  # per channel, after JPEG tiles and canvas scaling


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
    site = write_benchmark(tmp / "viewer" / "exp-1", "tcga", item_pages(runs, voted, items, pictures))
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


def test_the_viewer_page_zooms_over_tiles_and_its_crop_overlay_lies_on_the_crop(browser, viewer_page):
    url, server = viewer_page
    b, viewer = browser, "document.querySelector('.deepzoom').giantViewer"
    b.open(url)
    b.eval("document.querySelector('.deepzoom').scrollIntoView()")
    b.eval(f"new Promise((done) => {{ const t = () => ({viewer}) ? done(1) : setTimeout(t, 25); t(); }})")
    _settled(b, viewer)
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
    for kind in ("mousePressed", "mouseReleased"):
        b.send(
            "Input.dispatchMouseEvent", {"type": kind, "x": cx, "y": cy, "button": "left", "clickCount": 1}
        )
    panel = b.eval(
        "new Promise((done) => { let n = 0; const t = () => {"
        " const p = document.querySelector('.step-panel');"
        " if (!p.hidden || ++n > 200) done({hidden: p.hidden, text: p.textContent,"
        " img: (p.querySelector('img.crop') || {}).src || ''}); else setTimeout(t, 25); }; t(); })"
    )
    assert not panel["hidden"] and "MARK-TEXT green blob" in panel["text"]
    assert panel["img"].endswith("/run0/step1.png")
    assert b.problems() == []
