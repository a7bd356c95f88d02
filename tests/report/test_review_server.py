"""The review server over real HTTP on loopback, with real sample slides: tokens, blinding, images,
saving and revising, nobody reading another's review, two reviewers at once."""

from __future__ import annotations

import http.client
import io
import json
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


def request(port: int, method: str, path: str, token: str | None = None, body=None, cookie=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
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


def test_no_token_or_a_forged_one_is_refused(review) -> None:
    _, port, tokens = review
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
