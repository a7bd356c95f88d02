"""The review server's deep zoom over real HTTP: a queued unit names its ``.dzi``; descriptors and tiles
need a reviewer's token and a Host of this server, exactly as the API does; a slide outside the queue,
a tile outside the pyramid and a hostile path are 404; OpenSeadragon's files are served by name only."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from giant_assets.eval.reviews import add_reviewer
from giant_assets.report.slide_tiles import slide_key
from tests.report.test_review_server import SLIDE, request, served_review


@pytest.fixture
def review(tmp_path, sample_wsi_root):
    yield from served_review(tmp_path, sample_wsi_root)


def test_tiles_need_a_reviewer_and_this_servers_host(review, sample_wsi_root) -> None:
    files, port, tokens = review
    path = str(sample_wsi_root / SLIDE)
    dzi = f"/slides/{hashlib.sha256(path.encode()).hexdigest()[:24]}.dzi"
    _, _, body = request(port, "GET", "/api/queue", token=tokens["ana"])
    unit = json.loads(body)["units"][0]["unit"]
    status, _, body = request(port, "GET", f"/api/unit/{unit}", token=tokens["ana"])
    assert status == 200 and json.loads(body)["dzi"] == dzi and path not in body.decode()
    bearer = {"Authorization": f"Bearer {tokens['ana']}"}
    status, headers, body = request(port, "GET", dzi, headers=bearer)
    assert status == 200 and b'Width="4096" Height="3072"' in body
    assert headers["Cache-Control"] == "private, no-cache"  # asked for again before each reuse
    assert headers["Content-Security-Policy"].startswith("default-src 'self'")
    tile = dzi.replace(".dzi", "_files/12/0_0.jpeg")
    status, headers, body = request(port, "GET", tile, headers=bearer)
    assert status == 200 and headers["Content-Type"] == "image/jpeg" and body[:2] == b"\xff\xd8"
    assert request(port, "GET", tile, headers={})[0] == 401
    assert request(port, "GET", tile, headers={"Authorization": "Bearer forged"})[0] == 403
    status, _, body = request(port, "GET", tile, headers=bearer | {"Host": "evil.example:80"})
    assert status == 403 and b"not this server" in body  # DNS rebinding: the same Host check as the API
    for hostile in (
        f"/slides/{slide_key(path + 'x')}.dzi",  # a slide the queue does not hold
        dzi.replace(".dzi", "_files/13/0_0.jpeg"),
        dzi.replace(".dzi", "_files/1e308/0_0.jpeg"),
        "/slides/..%2f..%2fetc%2fpasswd",
    ):
        assert request(port, "GET", hostile, headers=bearer)[0] == 404, hostile


def test_the_pages_scripts_are_served_and_nothing_else_under_static(review) -> None:
    _, port, _ = review
    status, headers, body = request(port, "GET", "/static/deepzoom.js", headers={})
    assert status == 200 and headers["Content-Type"].startswith("text/javascript")
    assert b"GiantDeepZoom" in body
    for path in (
        "/static/vendor/../serve.py",
        "/static/vendor/openseadragon/openseadragon.js",
        "/static/x.js",
    ):
        assert request(port, "GET", path, headers={})[0] == 404, path


def test_a_drawn_region_is_checked_against_the_slide_even_when_the_items_lack_its_size(review) -> None:
    from giant_assets.eval.reviews import load_queue, read_reviews, write_queue

    files, port, tokens = review
    units = load_queue(files)
    write_queue(files, [u | {"shown": u["shown"] | {"slide_size": None}} for u in units])
    unit = units[0]["unit"]
    body = {"regions": [None, None], "answer": "correct", "supports": None, "drawn": [[4000, 3000, 200, 200]]}
    status, _, answer = request(port, "POST", f"/api/review/{unit}", token=tokens["ana"], body=body)
    assert (
        status == 400
        and "drawn[0]" in answer.decode()
        and "outside the slide (4096 x 3072)" in answer.decode()
    )
    assert read_reviews(files)[0] == []
    body["drawn"] = [[3896, 2872, 200, 200]]  # the slide's bottom-right corner, exactly inside
    assert request(port, "POST", f"/api/review/{unit}", token=tokens["ana"], body=body)[0] == 200


def test_a_revoked_token_gets_no_tile_on_revalidation_a_valid_one_304(review, sample_wsi_root) -> None:
    """Tiles are sent ``no-cache`` with an ETag, so the browser revalidates before each reuse: with the
    ETag in If-None-Match a valid token gets 304 and no body; once the token is replaced (add-reviewer
    again revokes it) the same revalidation is 403; another Host is 403 as on the first request."""
    files, port, tokens = review
    tile = f"/slides/{slide_key(str(sample_wsi_root / SLIDE))}_files/12/0_0.jpeg"
    for path in (tile, tile.replace("_files/12/0_0.jpeg", ".dzi")):
        bearer = {"Authorization": f"Bearer {tokens['ana']}"}
        status, headers, body = request(port, "GET", path, headers=bearer)
        assert status == 200 and headers["Cache-Control"] == "private, no-cache"
        etag = headers["ETag"]
        assert re.fullmatch(r'"[0-9a-f]{32}"', etag) and path.split("/")[2][:24] not in etag
        for asked in (etag, f"W/{etag}", f'"other", {etag}', "*"):
            status, again, body = request(port, "GET", path, headers=bearer | {"If-None-Match": asked})
            assert (status, body, again["ETag"], again["Cache-Control"]) == (
                304,
                b"",
                etag,
                "private, no-cache",
            )
            assert "Content-Length" not in again
        status, _, body = request(port, "GET", path, headers=bearer | {"If-None-Match": '"other"'})
        assert status == 200 and len(body) > 0  # a tag that is not this tile's: the tile
        foreign = bearer | {"If-None-Match": etag, "Host": "evil.example:80"}
        assert request(port, "GET", path, headers=foreign)[0] == 403
    fresh = add_reviewer(files, "ana")  # a new token: the old one is revoked
    for token, expected in ((tokens["ana"], 403), (fresh, 304)):
        headers = {"Authorization": f"Bearer {token}", "If-None-Match": etag}
        assert (
            request(port, "GET", tile.replace("_files/12/0_0.jpeg", ".dzi"), headers=headers)[0] == expected
        )
