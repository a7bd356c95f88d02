"""The blinded review server: one page per unit of the queue, served on loopback to reviewers holding a
token (``eval/reviews.py`` stores everything).

A reviewer opens ``http://127.0.0.1:8766/?token=<their token>`` once: the token becomes an HttpOnly,
SameSite=Strict cookie and the address drops it. Every API call is refused without a known token (401
missing, 403 unknown); a reviewer reads and writes only their own reviews, under the name their token
belongs to. The page is a static file plus a script (Content-Security-Policy: nothing inline), and puts
every text (question, the model's reasons, the answer) into the page as text, never as HTML.

    GET  /api/queue                      the reviewer's units in their own order, and which are reviewed
    GET  /api/unit/<id>                  the blinded unit and the reviewer's latest review of it
    GET  /api/unit/<id>/overview.png     the slide's overview (long side 1024)
    GET  /api/unit/<id>/region/<k>.jpg   the k-th viewed region (long side 512)
    POST /api/review/<id>                a review (JSON); saved durably before the answer
"""

from __future__ import annotations

import io
import json
import logging
import re
import threading
from http import HTTPStatus
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from giant_assets.eval.reviews import (
    ReviewError,
    ReviewFiles,
    append_review,
    blinded,
    latest_reviews,
    load_queue,
    order_for,
    read_reviews,
    reviewer_for,
    validate_review,
)
from giant_assets.slides.access import crop, open_slide, thumbnail

DEFAULT_PORT = 8766
COOKIE = "giant_review"
MAX_BODY = 256 * 1024
STATIC = ("review.html", "review.js", "review.css")
CSP = "default-src 'self'; img-src 'self'; style-src 'self'; script-src 'self'; frame-ancestors 'none'"
_UNIT = re.compile(r"^/api/unit/([0-9a-f]{1,64})(?:/overview\.png|/region/(\d{1,4})\.jpg)?$")
log = logging.getLogger("giant.review")


def _static(name: str) -> bytes:
    return resources.files("giant_assets.report.review").joinpath("static", name).read_bytes()


class ReviewHandler(BaseHTTPRequestHandler):
    """Routes of the review server; ``server.files`` is the review's ``ReviewFiles``."""

    server: ReviewServer

    # --- plumbing ---

    def _send(self, status: int, body: bytes, ctype: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", CSP)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, data: Any) -> None:
        self._send(status, json.dumps(data, ensure_ascii=False).encode(), "application/json; charset=utf-8")

    def _token(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            return auth[7:].strip()
        cookie = SimpleCookie(self.headers.get("Cookie", ""))
        return cookie[COOKIE].value if COOKIE in cookie else None

    def _reviewer(self) -> str | None:
        """The reviewer of this request, or None after answering 401 (no token) / 403 (unknown)."""
        token = self._token()
        if not token:
            self._json(HTTPStatus.UNAUTHORIZED, {"error": "no token: open the link you were given"})
            return None
        name = reviewer_for(self.server.files, token)
        if name is None:
            self._json(HTTPStatus.FORBIDDEN, {"error": "unknown token"})
        return name

    def _unit(self, unit_id: str) -> dict[str, Any] | None:
        return next((u for u in load_queue(self.server.files) if u["unit"] == unit_id), None)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (http.server's name)
        """Log without the query string: the first visit's address carries the reviewer's token."""
        log.debug("%s %s", self.command, urlsplit(self.path).path)

    # --- routes ---

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        url = urlsplit(self.path)
        if url.path == "/":
            token = parse_qs(url.query).get("token", [None])[0]
            if token is not None:
                if reviewer_for(self.server.files, token) is None:
                    self._json(HTTPStatus.FORBIDDEN, {"error": "unknown token"})
                    return
                cookie = f"{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"
                self._send(HTTPStatus.SEE_OTHER, b"", "text/plain", {"Location": "/", "Set-Cookie": cookie})
                return
            self._send(HTTPStatus.OK, _static("review.html"), "text/html; charset=utf-8")
            return
        if url.path == "/favicon.ico":
            self._send(HTTPStatus.NO_CONTENT, b"", "image/x-icon")
            return
        if url.path.startswith("/static/") and url.path[8:] in STATIC:
            name = url.path[8:]
            ctype = {"js": "text/javascript", "css": "text/css", "html": "text/html"}[name.rsplit(".", 1)[1]]
            self._send(HTTPStatus.OK, _static(name), f"{ctype}; charset=utf-8")
            return
        if not url.path.startswith("/api/"):
            self._json(HTTPStatus.NOT_FOUND, {"error": "not found"})
            return
        reviewer = self._reviewer()
        if reviewer is None:
            return
        if url.path == "/api/queue":
            self._queue(reviewer)
            return
        match = _UNIT.match(url.path)
        unit = self._unit(match.group(1)) if match else None
        if unit is None:
            self._json(HTTPStatus.NOT_FOUND, {"error": "no such unit"})
        elif url.path.endswith(".png"):
            self._image(unit, None)
        elif match.group(2) is not None:
            self._image(unit, int(match.group(2)))
        else:
            own = latest_reviews(read_reviews(self.server.files)[0]).get((reviewer, unit["unit"]))
            self._json(HTTPStatus.OK, blinded(unit) | {"review": _public(own)})

    def do_POST(self) -> None:  # noqa: N802
        url = urlsplit(self.path)
        reviewer = self._reviewer() if url.path.startswith("/api/review/") else None
        if not url.path.startswith("/api/review/"):
            self._json(HTTPStatus.NOT_FOUND, {"error": "not found"})
            return
        if reviewer is None:
            return
        unit = self._unit(url.path.rsplit("/", 1)[1])
        if unit is None:
            self._json(HTTPStatus.NOT_FOUND, {"error": "no such unit"})
            return
        length = self.headers.get("Content-Length", "")
        length = int(length) if length.isdigit() else 0
        if length <= 0 or length > MAX_BODY:
            self._json(HTTPStatus.BAD_REQUEST, {"error": f"a JSON body of 1..{MAX_BODY} bytes is needed"})
            return
        try:
            body = json.loads(self.rfile.read(length))
            review = validate_review(unit, body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            self._json(HTTPStatus.BAD_REQUEST, {"error": "the body is not JSON"})
            return
        except ReviewError as exc:
            self._json(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            return
        record = append_review(self.server.files, reviewer, unit["unit"], review)
        self._json(HTTPStatus.OK, {"saved": True, "submitted_at": record["submitted_at"]})

    def _queue(self, reviewer: str) -> None:
        done = {unit for (who, unit) in latest_reviews(read_reviews(self.server.files)[0]) if who == reviewer}
        units = order_for(self.server.files, reviewer, load_queue(self.server.files))
        listing = [{"unit": u["unit"], "reviewed": u["unit"] in done} for u in units]
        self._json(HTTPStatus.OK, {"reviewer": reviewer, "units": listing})

    def _image(self, unit: dict[str, Any], region: int | None) -> None:
        regions = unit["shown"]["regions"]
        if region is not None and region >= len(regions):
            self._json(HTTPStatus.NOT_FOUND, {"error": "no such region"})
            return
        try:
            slide = open_slide(unit["wsi_path"])
        except Exception as exc:  # the page shows the rest; the reviewer learns the slide is missing
            self._json(HTTPStatus.NOT_FOUND, {"error": f"slide not readable: {type(exc).__name__}"})
            return
        try:
            if region is None:
                image, fmt, ctype = thumbnail(slide, 1024, guides=False).image, "PNG", "image/png"
            else:
                image, fmt, ctype = crop(slide, regions[region]["box"], 512).image, "JPEG", "image/jpeg"
        finally:
            slide.close()
        buffer = io.BytesIO()
        image.convert("RGB").save(buffer, fmt)
        self._send(HTTPStatus.OK, buffer.getvalue(), ctype)


def _public(record: dict[str, Any] | None) -> dict[str, Any] | None:
    if record is None:
        return None
    return {k: record[k] for k in ("regions", "answer", "supports", "drawn", "comment", "submitted_at")}


class ReviewServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, files: ReviewFiles, host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> None:
        self.files = files
        super().__init__((host, port), ReviewHandler)


def serve_in_thread(files: ReviewFiles, port: int = 0) -> tuple[ReviewServer, threading.Thread]:
    """Start a loopback server in a daemon thread (tests); ``server.shutdown()`` stops it."""
    server = ReviewServer(files, port=port)
    thread = threading.Thread(target=server.serve_forever, name="giant-review", daemon=True)
    thread.start()
    return server, thread
