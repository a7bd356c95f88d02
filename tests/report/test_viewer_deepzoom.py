"""``giant-view`` serves deep zoom over HTTP: the descriptor and tiles of the slides its site build
listed (``_slides/``, never served itself), OpenSeadragon's files by name only, 404 for the rest."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from giant_assets.report import vendor
from giant_assets.report.slide_tiles import dzi_url, slide_key
from giant_assets.report.viewer.serve import serve_in_thread
from giant_assets.slides.synthetic import ONE_LESION_DESIGN
from tests.support.slides import write_pyramidal_slide


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[tuple[str, int, str]]:
    """(host, port, slide path) of a viewer folder whose experiment lists one real slide."""
    root = tmp_path_factory.mktemp("viewer")
    slide = str(write_pyramidal_slide(root.parent / "one.tiff", ONE_LESION_DESIGN, levels=3))
    (root / "exp" / "_slides").mkdir(parents=True)
    (root / "exp" / "_slides" / "bench.json").write_text(json.dumps({slide_key(slide): slide}))
    server, thread = serve_in_thread(root)
    try:
        yield *server.server_address[:2], slide
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def _get(host: str, port: int, path: str, method: str = "GET", headers=None) -> http.client.HTTPResponse:
    conn = http.client.HTTPConnection(host, port, timeout=10)
    conn.request(method, path, headers=headers or {})
    response = conn.getresponse()
    response.body = response.read()  # type: ignore[attr-defined]
    conn.close()
    return response


def test_the_descriptor_and_tiles_of_a_listed_slide_are_served_with_cache_headers(served) -> None:
    host, port, slide = served
    dzi = _get(host, port, dzi_url(slide))
    assert dzi.status == 200 and dzi.getheader("Content-Type") == "application/xml"
    assert b'Width="4096" Height="3072"' in dzi.body
    assert dzi.getheader("Cache-Control") == "private, max-age=3600"
    tile = _get(host, port, f"/slides/{slide_key(slide)}_files/12/3_2.jpeg")
    assert tile.status == 200 and tile.getheader("Content-Type") == "image/jpeg"
    assert tile.body[:3] == b"\xff\xd8\xff" and tile.getheader("Cache-Control") == "private, max-age=3600"
    assert _get(host, port, f"/slides/{slide_key(slide)}_files/12/3_2.jpeg", "HEAD").status == 200
    # no token to revoke here: reused for an hour as before, then revalidated by its ETag (304, no body)
    again = _get(
        host,
        port,
        f"/slides/{slide_key(slide)}_files/12/3_2.jpeg",
        headers={"If-None-Match": tile.getheader("ETag")},
    )
    assert (again.status, again.body, again.getheader("ETag")) == (304, b"", tile.getheader("ETag"))
    assert again.getheader("Cache-Control") == "private, max-age=3600"
    assert tile.getheader("ETag") != dzi.getheader("ETag")


def test_unlisted_slides_hostile_paths_and_the_key_files_are_404(served) -> None:
    host, port, slide = served
    key = slide_key(slide)
    for path in (
        dzi_url(slide + "x"),  # a slide the site does not show
        f"/slides/{key}_files/13/0_0.jpeg",
        f"/slides/{key}_files/1e308/0_0.jpeg",
        "/slides/..%2f..%2fetc%2fpasswd",
        "/exp/_slides/bench.json",  # the key file names paths on this machine: not served
        "/exp/%5fslides/bench.json",
        "/static/vendor/openseadragon/../../../viewer/serve.py",
        "/static/vendor/openseadragon/openseadragon.js",
    ):
        response = _get(host, port, path)
        assert response.status == 404, path
        assert slide.encode() not in response.body


def test_openseadragon_is_served_when_installed_and_missing_files_are_a_hint(
    served, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    host, port, _ = served
    fake = tmp_path / "vendor"
    (fake / "openseadragon" / "images").mkdir(parents=True)
    (fake / "openseadragon" / "openseadragon.min.js").write_text("window.OpenSeadragon = 1;")
    (fake / "openseadragon" / "images" / "home_rest.png").write_bytes(b"\x89PNG")
    monkeypatch.setattr(vendor, "VENDOR_DIR", fake)
    assert vendor.deep_zoom_available()
    script = _get(host, port, "/static/vendor/openseadragon/openseadragon.min.js")
    assert script.status == 200 and script.body == b"window.OpenSeadragon = 1;"
    assert script.getheader("Content-Type").startswith("text/javascript")
    assert _get(host, port, "/static/vendor/openseadragon/images/home_rest.png").body == b"\x89PNG"
    (fake / "openseadragon" / "openseadragon.min.js").unlink()
    assert not vendor.deep_zoom_available()
    missing = _get(host, port, "/static/vendor/openseadragon/openseadragon.min.js")
    assert missing.status == 404 and b"run make" in missing.body


def test_a_hostile_key_file_is_skipped_and_the_others_still_serve(tmp_path: Path, caplog) -> None:
    slide = str(write_pyramidal_slide(tmp_path / "s.tiff", ONE_LESION_DESIGN, levels=1))
    keys = tmp_path / "viewer" / "exp" / "_slides"
    keys.mkdir(parents=True)
    (keys / "a.json").write_text("[" * 100_000)  # nested too deeply for Python's json
    (keys / "b.json").write_text(json.dumps({slide_key(slide): slide, "x": ["not", "a", "path"]}))
    server, thread = serve_in_thread(tmp_path / "viewer")
    try:
        host, port = server.server_address[:2]
        assert _get(host, port, dzi_url(slide)).status == 200
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
    assert "a.json: RecursionError" in caplog.text
