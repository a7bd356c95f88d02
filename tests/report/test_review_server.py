"""The review server over real HTTP on loopback, with real sample slides: tokens, blinding, images,
saving and revising, nobody reading another's review, two reviewers at once."""

from __future__ import annotations

import http.client
import io
import json
import logging
import threading
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from giant_assets.eval.reviews import ReviewFiles, add_reviewer, build_units, read_reviews, write_queue
from giant_assets.report.review.serve import serve_in_thread

SLIDE = "tcga/TCGA-05-4244-01Z-00-DX1.svs"  # 4096 x 3072
RATED = {
    "regions": ["relevant", "partly"],
    "answer": "correct",
    "supports": "yes",
    "drawn": [[100, 200, 300, 400]],
}


def _runs(experiment_model: str, n: int) -> pd.DataFrame:
    steps = [
        {"index": 0, "action": "thumbnail", "box": [0, 0, 4096, 3072]},
        {
            "index": 1,
            "action": "crop",
            "box": [800, 800, 400, 400],
            "text": '<img src=x onerror="window.pwned=1">',
        },
        {"index": 2, "action": "crop", "box": [2850, 1760, 300, 480], "text": "<b>second</b>"},
        {"index": 3, "action": "answer", "text": "2"},
    ]
    return pd.DataFrame(
        {
            "config_hash": f"hash-{experiment_model}",
            "model": experiment_model,
            "benchmark_name": "tcga",
            "benchmark_id": [str(i) for i in range(n)],
            "run_index": 0,
            "truth_label": 1,
            "correct": False,
            "answer_text": "<script>window.pwned=2</script>Answer: 2",
            "trajectory_json": json.dumps(steps),
        }
    )


@pytest.fixture
def review(tmp_path: Path, sample_wsi_root: Path):
    yield from served_review(tmp_path, sample_wsi_root)


def served_review(tmp_path: Path, sample_wsi_root: Path):
    """A queue of 8 units on a sample slide, reviewers ana and ben, served on loopback:
    yields (files, port, tokens), then stops the server."""
    files = ReviewFiles(tmp_path / "reviews")
    items = pd.DataFrame(
        {
            "benchmark_name": "tcga",
            "benchmark_id": [str(i) for i in range(4)],
            "prompt": "Which <i>site</i>?",
            "wsi_path": str(sample_wsi_root / SLIDE),
            "width": 4096,
            "height": 3072,
        }  # fmt: skip
    )
    units = build_units(files.secret(), "exp-alpha", _runs("model-one", 4), items)
    units += build_units(files.secret(), "exp-beta", _runs("model-two", 4), items)
    write_queue(files, units)
    tokens = {name: add_reviewer(files, name) for name in ("ana", "ben")}
    server, _ = serve_in_thread(files)
    try:
        yield files, server.server_address[1], tokens
    finally:
        server.shutdown()
        server.server_close()


def request(
    port: int, method: str, path: str, token: str | None = None, body=None, cookie=None, headers=None
):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = ({"Authorization": f"Bearer {token}"} if token else {}) | (headers or {})
    if cookie:
        headers["Cookie"] = cookie
    data = None if body is None else json.dumps(body).encode()
    if data is not None:
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=headers)
    response = conn.getresponse()
    payload = response.read()
    conn.close()
    return response.status, dict(response.getheaders()), payload


def test_no_token_or_a_forged_one_is_refused(review, caplog) -> None:
    _, port, tokens = review
    caplog.set_level(logging.DEBUG, logger="giant.review")
    assert request(port, "GET", "/api/queue")[0] == 401
    assert request(port, "GET", "/api/queue", token=tokens["ana"] + "x")[0] == 403
    assert request(port, "POST", "/api/review/0000", token="forged", body=RATED)[0] == 403
    assert request(port, "GET", "/?token=forged")[0] == 403
    status, headers, _ = request(port, "GET", f"/?token={tokens['ana']}")
    assert status == 303 and headers["Location"] == "/"
    assert "HttpOnly" in headers["Set-Cookie"] and "SameSite=Strict" in headers["Set-Cookie"]
    cookie = headers["Set-Cookie"].split(";")[0]
    status, _, body = request(port, "GET", "/api/queue", cookie=cookie)
    assert status == 200 and json.loads(body)["reviewer"] == "ana"
    assert "GET /api/queue" in caplog.text and tokens["ana"] not in caplog.text  # logged without the query
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.putrequest("POST", f"/api/review/{json.loads(body)['units'][0]['unit']}")
    conn.putheader("Authorization", f"Bearer {tokens['ana']}")
    conn.putheader("Content-Length", "nonsense")
    conn.endheaders()
    assert conn.getresponse().status == 400  # not a traceback
    conn.close()


def test_the_queue_is_blinded_and_ordered_per_reviewer(review) -> None:
    _, port, tokens = review
    orders = {}
    for name, token in tokens.items():
        status, _, body = request(port, "GET", "/api/queue", token=token)
        assert status == 200
        orders[name] = [u["unit"] for u in json.loads(body)["units"]]
    assert sorted(orders["ana"]) == sorted(orders["ben"]) and len(orders["ana"]) == 8
    assert orders["ana"] != orders["ben"]
    _, _, body = request(port, "GET", f"/api/unit/{orders['ana'][0]}", token=tokens["ana"])
    text = body.decode()
    for hidden in ("exp-alpha", "exp-beta", "model-one", "model-two", "hash-", "truth", 'correct"'):
        assert hidden not in text
    unit = json.loads(body)
    assert unit["slide_size"] == [4096, 3072] and [r["box"] for r in unit["regions"]] == [
        [800, 800, 400, 400],
        [2850, 1760, 300, 480],
    ]


def test_images_are_drawn_from_the_slide(review) -> None:
    _, port, tokens = review
    _, _, body = request(port, "GET", "/api/queue", token=tokens["ana"])
    unit = json.loads(body)["units"][0]["unit"]
    status, headers, png = request(port, "GET", f"/api/unit/{unit}/overview.png", token=tokens["ana"])
    assert status == 200 and headers["Content-Type"] == "image/png"
    assert Image.open(io.BytesIO(png)).size == (1024, 768)
    status, _, jpg = request(port, "GET", f"/api/unit/{unit}/region/1.jpg", token=tokens["ana"])
    assert status == 200 and Image.open(io.BytesIO(jpg)).size == (320, 512)
    assert request(port, "GET", f"/api/unit/{unit}/region/2.jpg", token=tokens["ana"])[0] == 404


def test_saved_reviews_come_back_are_revised_and_stay_private(review) -> None:
    files, port, tokens = review
    _, _, body = request(port, "GET", "/api/queue", token=tokens["ana"])
    unit = json.loads(body)["units"][0]["unit"]
    forged = RATED | {"reviewer": "ben"}  # a name in the body changes nothing
    status, _, body = request(port, "POST", f"/api/review/{unit}", token=tokens["ana"], body=forged)
    assert status == 200 and json.loads(body)["saved"] is True
    status, _, body = request(
        port, "POST", f"/api/review/{unit}", token=tokens["ana"], body=RATED | {"answer": "wrong"}
    )
    assert status == 200
    _, _, body = request(port, "GET", f"/api/unit/{unit}", token=tokens["ana"])
    assert json.loads(body)["review"]["answer"] == "wrong"
    assert json.loads(body)["review"]["drawn"] == [[100.0, 200.0, 300.0, 400.0]]
    _, _, body = request(port, "GET", f"/api/unit/{unit}", token=tokens["ben"])
    assert json.loads(body)["review"] is None  # never served to another reviewer
    _, _, body = request(port, "GET", "/api/queue", token=tokens["ana"])
    assert [u["reviewed"] for u in json.loads(body)["units"]].count(True) == 1
    _, _, body = request(port, "GET", "/api/queue", token=tokens["ben"])
    assert not any(u["reviewed"] for u in json.loads(body)["units"])  # ana's review is not ben's
    records, _ = read_reviews(files)
    assert [(r["reviewer"], r["answer"]) for r in records] == [("ana", "correct"), ("ana", "wrong")]
    status, _, body = request(
        port, "POST", f"/api/review/{unit}", token=tokens["ana"], body=RATED | {"answer": 3}
    )
    assert status == 400 and "field 'answer'" in json.loads(body)["error"]
    assert len(read_reviews(files)[0]) == 2


def test_two_reviewers_at_once_lose_nothing(review) -> None:
    files, port, tokens = review
    _, _, body = request(port, "GET", "/api/queue", token=tokens["ana"])
    units = [u["unit"] for u in json.loads(body)["units"]]
    failures = []

    def rate(name: str) -> None:
        for i in range(3):
            for unit in units:
                status, _, _ = request(
                    port, "POST", f"/api/review/{unit}", token=tokens[name], body=RATED | {"comment": f"{i}"}
                )
                if status != 200:
                    failures.append(status)

    threads = [threading.Thread(target=rate, args=(name,)) for name in tokens]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    records, skipped = read_reviews(files)
    assert not failures and skipped == 0 and len(records) == 2 * 3 * len(units)


# --- in Chromium -----------------------------------------------------------------------------------

from tests.report.browser import Browser, chromium_path  # noqa: E402

VIEWPORT = {"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": False}
READY = (
    "new Promise((done) => { let n = 0; const tick = () => {"
    " const img = document.getElementById('overview');"
    " const ready = !document.getElementById('unit').hidden && img.complete && img.naturalWidth > 0"
    "   && document.querySelectorAll('#regions .region').length > 0;"
    " if (ready || ++n > 400) done(ready); else setTimeout(tick, 25); }; tick(); })"
)
SAVED = (
    "new Promise((done) => { let n = 0; const tick = () => {"
    " const s = document.getElementById('status').textContent;"
    " if (s.startsWith('saved') || ++n > 400) done(s); else setTimeout(tick, 25); }; tick(); })"
)


# these tests draw on the static overview (on the deep zoom: test_deepzoom_browser.py)
OVERVIEW = "window.showOverview(true); true"


def _open(b: Browser, url: str) -> None:
    b.open(url)
    assert b.eval(READY) is True, b.problems()
    b.eval(OVERVIEW)


def _drag(b: Browser, start: tuple[float, float], end: tuple[float, float]) -> None:
    """A real mouse drag over the overview, in fractions of its shown size."""
    rect = b.eval("(() => { const r = document.getElementById('overlay').getBoundingClientRect();"
                  " return [r.left, r.top, r.width, r.height]; })()")  # fmt: skip
    left, top, width, height = rect
    x0, y0 = left + start[0] * width, top + start[1] * height
    x1, y1 = left + end[0] * width, top + end[1] * height
    press = {"button": "left", "clickCount": 1}
    for event in (
        {"type": "mouseMoved", "x": x0, "y": y0},
        {"type": "mousePressed", "x": x0, "y": y0, **press},
        {"type": "mouseMoved", "x": x1, "y": y1, "buttons": 1},
        {"type": "mouseReleased", "x": x1, "y": y1, **press},
    ):
        b.send("Input.dispatchMouseEvent", event)


def _reload(b: Browser) -> None:
    since = len(b.events)
    b.send("Page.reload")
    b.wait_for("Page.loadEventFired", since)
    assert b.eval(READY) is True, b.problems()
    b.eval(OVERVIEW)


def _rate(b: Browser, region0: str, answer: str) -> None:
    b.eval(
        f'document.querySelector(\'input[name="region-0"][value="{region0}"]\').click();'
        'document.querySelector(\'input[name="region-1"][value="not relevant"]\').click();'
        f'document.querySelector(\'input[name="answer"][value="{answer}"]\').click();'
        'document.querySelector(\'input[name="supports"][value="partly"]\').click();'
        "document.getElementById('comment').value = '<b>not bold</b>'; true"
    )


def test_in_chromium_two_reviewers_rate_draw_reload_and_html_stays_inert(review) -> None:
    files, port, tokens = review
    base = f"http://127.0.0.1:{port}/"
    exe = chromium_path()
    with Browser(exe) as ana, Browser(exe) as ben:
        for b, name in ((ana, "ana"), (ben, "ben")):
            b.send("Emulation.setDeviceMetricsOverride", VIEWPORT)
            _open(b, f"{base}?token={tokens[name]}")
            assert b.eval("location.search") == ""  # the token left the address for a cookie
        # the model's text and the answer are shown as text: no element made from them, no script run
        assert ana.eval("window.pwned === undefined && document.querySelectorAll('#regions img').length") == 2
        assert (
            ana.eval("document.querySelector('.reason').textContent")
            == '<img src=x onerror="window.pwned=1">'
        )
        assert ana.eval("document.getElementById('answer').textContent").startswith("<script>")
        assert ana.eval("document.getElementById('question').textContent") == "Which <i>site</i>?"
        first = {n: b.eval("queue[position].unit") for n, b in (("ana", ana), ("ben", ben))}
        _rate(ana, "relevant", "correct")
        _rate(ben, "partly", "wrong")
        _drag(ana, (0.25, 0.25), (0.5, 0.75))
        assert ana.eval("document.querySelectorAll('#overlay rect.drawn').length") == 1
        ana.eval("document.getElementById('submit').click(); true")
        ben.eval("document.getElementById('submit').click(); true")
        assert ana.eval(SAVED).startswith("saved") and ben.eval(SAVED).startswith("saved")

        _reload(ana)  # the same unit, its review kept
        assert ana.eval("queue[position].unit") == first["ana"]
        checked = "[...document.querySelectorAll('input:checked')].map(i => i.name + '=' + i.value)"
        assert sorted(ana.eval(checked)) == sorted(
            ["region-0=relevant", "region-1=not relevant", "answer=correct", "supports=partly"]
        )
        assert ana.eval("document.querySelectorAll('#overlay rect.drawn').length") == 1
        assert ana.eval("document.getElementById('comment').value") == "<b>not bold</b>"
        assert ana.problems() == [] and ben.problems() == []

    records, _ = read_reviews(files)
    by_reviewer = {r["reviewer"]: r for r in records}
    assert set(by_reviewer) == {"ana", "ben"} and len(records) == 2
    assert (by_reviewer["ana"]["unit"], by_reviewer["ben"]["unit"]) == (first["ana"], first["ben"])
    assert by_reviewer["ben"]["answer"] == "wrong" and by_reviewer["ben"]["drawn"] == []
    (x, y, w, h) = by_reviewer["ana"]["drawn"][0]
    assert (x, y, w, h) == pytest.approx(
        (1024, 768, 1024, 1536), abs=12
    )  # a quarter to a half of 4096 x 3072


def test_in_chromium_without_a_valid_token_nothing_is_shown(review) -> None:
    _, port, _ = review
    with Browser(chromium_path()) as b:
        b.open(f"http://127.0.0.1:{port}/")
        status = "new Promise((d) => setTimeout(() => d(document.getElementById('status').textContent), 300))"
        assert "no token" in b.eval(status)
        assert b.eval("document.getElementById('unit').hidden") is True
