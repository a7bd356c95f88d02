"""The review server against forged and hostile requests over real HTTP on loopback: a page on another
loopback port, a foreign or rebinding host, a form post, a missing CSRF token; bodies and request lines
that used to raise (too deep, too many digits, too long); a burst of clients; a port that is none."""

from __future__ import annotations

import functools
import http.client
import http.server
import json
import re
import socket
import threading
from pathlib import Path

import pytest

from giant_assets.eval.reviews import ReviewFiles, load_queue, read_reviews, write_queue
from giant_assets.report.review.cli import main as review_main
from giant_assets.report.review.serve import CSRF_HEADER, MAX_BODY, ReviewServer
from giant_assets.report.viewer.serve import main as view_main
from tests.report.test_review_server import RATED, request, served_review


@pytest.fixture
def review(tmp_path: Path, sample_wsi_root: Path):
    yield from served_review(tmp_path, sample_wsi_root)


def _session(port: int, token: str) -> tuple[str, str, list[str]]:
    """(cookie, CSRF token from the page, the reviewer's units) as a browser gets them."""
    status, headers, _ = request(port, "GET", f"/?token={token}")
    assert status == 303
    cookie = headers["Set-Cookie"].split(";")[0]
    status, _, page = request(port, "GET", "/", cookie=cookie)
    found = re.search(rb'<meta name="review-csrf" content="([0-9a-f]{64})">', page)
    assert status == 200 and found, page[:400]
    _, _, body = request(port, "GET", "/api/queue", cookie=cookie)
    return cookie, found[1].decode(), [u["unit"] for u in json.loads(body)["units"]]


def _post(port: int, path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict]:
    """A POST with exactly these headers (http.client adds Host unless given, and Content-Length)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.putrequest("POST", path, skip_host="Host" in headers)
    for key, value in headers.items():
        conn.putheader(key, value)
    conn.putheader("Content-Length", str(len(body)))
    conn.endheaders(body)
    response = conn.getresponse()
    payload = response.read()
    conn.close()
    return response.status, json.loads(payload) if payload else {}


def test_forged_saves_are_refused_and_store_nothing(review) -> None:
    files, port, tokens = review
    cookie, csrf, units = _session(port, tokens["ana"])
    _, ben_csrf, _ = _session(port, tokens["ben"])
    own = f"http://127.0.0.1:{port}"
    good = {"Cookie": cookie, "Origin": own, "Content-Type": "application/json", CSRF_HEADER: csrf}
    body = json.dumps(RATED).encode()
    path = f"/api/review/{units[0]}"
    forged = {
        "another loopback port (Dagster UI)": (good | {"Origin": "http://127.0.0.1:3000"}, 403),
        "another loopback name and port": (good | {"Origin": f"http://localhost:{port + 1}"}, 403),
        "an opaque origin": (good | {"Origin": "null"}, 403),
        "a foreign host": (good | {"Origin": "https://evil.example"}, 403),
        "DNS rebinding": (
            good | {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"},
            403,
        ),
        "another port in Host": (good | {"Host": f"127.0.0.1:{port + 1}"}, 403),
        "a form post": (good | {"Content-Type": "text/plain"}, 415),
        "a form post without Origin": ({"Cookie": cookie, "Content-Type": "text/plain;charset=UTF-8"}, 415),
        "urlencoded": (good | {"Content-Type": "application/x-www-form-urlencoded"}, 415),
        "no CSRF token": ({k: v for k, v in good.items() if k != CSRF_HEADER}, 403),
        "another session's CSRF token": (good | {CSRF_HEADER: ben_csrf}, 403),
        "a same-site fetch without Origin": (
            {k: v for k, v in good.items() if k != "Origin"} | {"Sec-Fetch-Site": "same-site"},
            403,
        ),
    }
    for name, (headers, expected) in forged.items():
        status, answer = _post(port, path, headers, body)
        assert (status, bool(answer.get("error"))) == (expected, True), name
        assert read_reviews(files) == ([], 0), name  # nothing stored
    # the page's own save, and the same from the loopback name, or without Origin but same-origin
    assert _post(port, path, good, body)[0] == 200
    local = good | {"Host": f"localhost:{port}", "Origin": f"http://localhost:{port}"}
    assert _post(port, path, local, body)[0] == 200
    same = {k: v for k, v in good.items() if k != "Origin"} | {"Sec-Fetch-Site": "same-origin"}
    assert _post(port, path, same, body)[0] == 200
    assert [r["reviewer"] for r in read_reviews(files)[0]] == ["ana"] * 3


def test_forged_reads_are_refused(review) -> None:
    _, port, tokens = review
    cookie, _, _ = _session(port, tokens["ana"])
    for headers in (
        {"Origin": "http://127.0.0.1:3000"},
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
        {"Host": f"evil.example:{port}"},
    ):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/api/queue", headers={"Cookie": cookie} | headers)
        response = conn.getresponse()
        assert response.status == 403 and b"error" in response.read(), headers
        conn.close()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/", headers={"Host": f"evil.example:{port}"})  # a rebinding page reads nothing
    assert conn.getresponse().status == 403
    conn.close()
    _, _, page = request(port, "GET", "/")  # without a session the page carries no token
    assert b'<meta name="review-csrf" content="">' in page


def _nested(depth: int) -> bytes:
    return b'{"regions": ["relevant", "partly"], "drawn": ' + b"[" * depth + b"]" * depth + b"}"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (_nested(120_000), "nested too deeply"),
        (b"[" * 200_000, "nested too deeply"),
        (b'{"regions": ["relevant", "partly"], "drawn": [[' + b"9" * 5000 + b", 0, 1, 1]]}", "4300 digits"),
        (b'{"regions": ["relevant", "partly"], "drawn": [[NaN, 0, 1, 1]]}', "NaN is no JSON number"),
        (b'{"regions": ["relevant", "partly"], "drawn": [[0, 0, Infinity, 1]]}', "Infinity is no JSON"),
        (b'{"regions": ["relevant", "partly"], "drawn": [[0, 0, 1e400, 1]]}', "'drawn[0]': w = inf"),
        (b'{"regions": ["relevant", "partly"], "drawn": [[0, 3000, 10, 100]]}', "outside the slide"),
        (b"\xff\xfe{}", "not JSON"),
        (b"x" * (MAX_BODY + 1), f"1..{MAX_BODY} bytes"),
    ],
    ids=["deep-200k", "deep-unclosed", "5000-digits", "NaN", "Infinity", "1e400", "below", "utf8", "max+1"],
)
def test_hostile_bodies_get_a_clear_400_and_store_nothing(review, capfd, body: bytes, message: str) -> None:
    files, port, tokens = review
    _, _, units = _session(port, tokens["ana"])
    headers = {"Authorization": f"Bearer {tokens['ana']}", "Content-Type": "application/json"}
    status, answer = _post(port, f"/api/review/{units[0]}", headers, body)
    assert status == 400 and message in answer["error"], answer
    assert "Traceback" not in answer["error"] and "Traceback" not in capfd.readouterr().err
    assert read_reviews(files) == ([], 0)
    assert request(port, "GET", "/api/queue", token=tokens["ana"])[0] == 200  # the server lives on


def test_a_queued_region_outside_the_slide_is_a_404_not_a_traceback(review, capfd) -> None:
    files, port, tokens = review
    units = load_queue(files)
    units[0]["shown"]["regions"][1]["box"] = [10**12, 0, 100, 100]  # queued before prepare checked it
    write_queue(files, units)
    status, _, body = request(port, "GET", f"/api/unit/{units[0]['unit']}/region/1.jpg", token=tokens["ana"])
    assert status == 404 and "outside the slide" in json.loads(body)["error"]
    assert request(port, "GET", f"/api/unit/{units[0]['unit']}/region/0.jpg", token=tokens["ana"])[0] == 200
    assert "Traceback" not in capfd.readouterr().err


def _raw(port: int, data: bytes) -> bytes:
    """Send ``data`` (in a thread: it may be large) and read the answer until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sender = threading.Thread(target=lambda: sock.sendall(data), daemon=True)
        sender.start()
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
        sender.join(30)
    return b"".join(chunks)


@pytest.mark.parametrize(
    ("line", "status"),
    [
        (b"GARBAGE", b"400"),
        (b"GET / HTTP/9.9", b"505"),
        (b"GET /" + b"a" * 1_000_000 + b" HTTP/1.1", b"414"),
        (b"GET /\x00 HTTP/1.1", b"403"),  # no Host: not this server's
    ],
    ids=["garbage", "http-9.9", "1mb-line", "no-host"],
)
def test_a_bad_request_line_gets_an_answer(review, capfd, line: bytes, status: bytes) -> None:
    _, port, _ = review
    answer = _raw(port, line + b"\r\n\r\n")
    assert answer.startswith(b"HTTP/1.0 " + status), answer[:200]
    assert "Traceback" not in capfd.readouterr().err


BURST = 200


def test_a_burst_of_clients_waits_in_the_backlog_and_all_are_answered(review) -> None:
    """BURST clients connect before the server accepts any (the listen backlog holds them all), then all
    post at once: every one gets its 200 and every review is stored."""
    files, _, tokens = review
    server = ReviewServer(files, port=0)
    port = server.server_address[1]
    socks: list[socket.socket] = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    try:
        for _ in range(BURST):  # nothing accepts yet: a short backlog would leave these SYNs unanswered
            socks.append(socket.create_connection(("127.0.0.1", port), timeout=3))
        units = [u["unit"] for u in load_queue(files)]
        thread.start()
        statuses: list[bytes] = []

        def post(sock: socket.socket, unit: str) -> None:
            data = json.dumps(RATED).encode()
            head = (
                f"POST /api/review/{unit} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"Authorization: Bearer {tokens['ana']}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
            ).encode()
            sock.settimeout(60)
            sock.sendall(head + data)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
            statuses.append(answer[9:12])

        threads = [
            threading.Thread(target=post, args=(s, units[i % len(units)])) for i, s in enumerate(socks)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert statuses == [b"200"] * BURST
        records, skipped = read_reviews(files)
        assert len(records) == BURST and skipped == 0
    finally:
        for s in socks:
            s.close()
        if thread.is_alive():  # shutdown() waits for serve_forever, forever if it never started
            server.shutdown()
        server.server_close()


@pytest.mark.parametrize("port", ["99999", "-1", "http", "1e3"])
def test_a_port_that_is_none_is_a_usage_error(tmp_path: Path, capsys, port: str) -> None:
    for main, name in ((review_main, "giant-review serve"), (view_main, "giant-view")):
        args = ["--data-dir", str(tmp_path), "serve"] if main is review_main else ["--dir", str(tmp_path)]
        with pytest.raises(SystemExit) as stopped:
            main([*args, "--port", port])
        err = capsys.readouterr().err
        assert stopped.value.code == 2 and f"{name}: error: argument --port" in err, err
        assert "is not a port number (0..65535)" in err and "Traceback" not in err
    assert not ReviewFiles(tmp_path / "reviews").queue.exists()


# --- in Chromium: a page on another loopback port, with the reviewer's cookie in the browser ----------

from tests.report.browser import Browser, chromium_path  # noqa: E402

FORGE = (
    "Promise.all([{mode: 'no-cors', headers: {'Content-Type': 'text/plain'}},"
    " {mode: 'cors', headers: {'Content-Type': 'application/json'}}].map((how) =>"
    " fetch(%r, {method: 'POST', credentials: 'include', body: %r, ...how})"
    "   .then((r) => r.type + ' ' + r.status, (e) => 'refused: ' + e.message)))"
)


def test_in_chromium_a_page_on_another_loopback_port_cannot_save(review, tmp_path: Path) -> None:
    files, port, tokens = review
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "index.html").write_text("<!doctype html><title>another loopback app</title>")
    other = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(evil))
    )
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        with Browser(chromium_path()) as b:
            b.open(f"http://127.0.0.1:{port}/?token={tokens['ana']}")  # the reviewer's cookie is set
            unit = b.eval("fetch('/api/queue').then((r) => r.json()).then((q) => q.units[0].unit)")
            b.open(f"http://127.0.0.1:{other.server_address[1]}/")  # the same site, another port
            target = f"http://127.0.0.1:{port}/api/review/{unit}"
            outcomes = b.eval(FORGE % (target, json.dumps(RATED)))
        assert outcomes[0] == "opaque 0" and outcomes[1].startswith("refused")  # no answer to read
        assert read_reviews(files) == ([], 0)  # and nothing stored under ana's name
    finally:
        other.shutdown()
        other.server_close()
