"""The blinded review server: one page per unit of the queue, served on loopback to reviewers holding a
token (``eval/reviews.py`` stores everything).

A reviewer opens ``http://127.0.0.1:8766/?token=<their token>`` once: the token becomes an HttpOnly,
SameSite=Strict cookie and the address drops it. Every API call is refused without a known token (401
missing, 403 unknown); a reviewer reads and writes only their own reviews, under the name their token
belongs to. The page is a static file plus a script (Content-Security-Policy: nothing inline), and puts
every text (question, the model's reasons, the answer) into the page as text, never as HTML.

Forged requests (``docs/pathologists.md``): SameSite does not tell this server from the Dagster UI or a
notebook on another loopback port (one site), so every request must name a ``Host`` the server was
started with (DNS rebinding), an API call from another origin (``Origin``, ``Sec-Fetch-Site``) is
refused, and a review is saved only from ``application/json`` carrying, with the cookie, the page's
per-session CSRF token in ``X-Review-CSRF`` (a script sending the reviewer token as ``Authorization:
Bearer`` needs none: no browser adds that header by itself).

    GET  /api/queue                      the reviewer's units in their own order, and which are reviewed
    GET  /api/unit/<id>                  the blinded unit and the reviewer's latest review of it
    GET  /api/unit/<id>/overview.png     the slide's overview (long side 1024)
    GET  /api/unit/<id>/region/<k>.jpg   the k-th viewed region (long side 512)
    POST /api/review/<id>                a review (JSON); saved durably before the answer
    GET  /slides/<key>.dzi, /slides/<key>_files/<level>/<col>_<row>.jpeg
                                         deep zoom of a queued unit's slide (``report.slide_tiles``):
                                         the same Host check, and a reviewer's token, as the API;
                                         ``no-cache`` with an ETag: the browser asks again (304)
                                         before each reuse, so a revoked token sees no more tiles
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import logging
import re
import threading
from collections.abc import Iterable
from http import HTTPStatus
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from giant_assets.core.serving import BurstHTTPServer, allowed_hosts
from giant_assets.eval.reviews import (
    ReviewError,
    ReviewFiles,
    append_review,
    blinded,
    latest_reviews,
    order_for,
    read_reviews,
    reviewable_queue,
    reviewer_for,
    validate_review,
)
from giant_assets.report.slide_tiles import PREFIX, REVALIDATE, SlideTiles, dzi_url, slide_key
from giant_assets.report.vendor import static_file
from giant_assets.slides.access import InvalidRegion, crop, open_slide, thumbnail

DEFAULT_PORT = 8766
COOKIE = "giant_review"
MAX_BODY = 256 * 1024
CSRF_HEADER = "X-Review-CSRF"
CSRF_MARKER = b'<meta name="review-csrf" content="">'
STATIC = ("review.html", "review.js", "review.css")
CSP = "default-src 'self'; img-src 'self'; style-src 'self'; script-src 'self'; frame-ancestors 'none'"
_UNIT = re.compile(r"^/api/unit/([0-9a-f]{1,64})(?:/overview\.png|/region/(\d{1,4})\.jpg)?$")
log = logging.getLogger("giant.review")


def _static(name: str) -> bytes:
    return resources.files("giant_assets.report.review").joinpath("static", name).read_bytes()


def csrf_token(secret: bytes, reviewer_token: str) -> str:
    """The CSRF token of a session (the reviewer's cookie): keyed by the review's secret, so a page
    opened before a restart still saves, and useless without the cookie it belongs to."""
    return hmac.new(secret, b"csrf\x1f" + reviewer_token.encode(), hashlib.sha256).hexdigest()


class NotJson(ValueError):
    """A body Python's json module would read but JSON has no such value (NaN, Infinity)."""


def _reject_constant(name: str) -> Any:
    raise NotJson(f"the body is not JSON: {name} is no JSON number")


def _body_error(exc: Exception) -> str:
    """What a 400 says of a body that did not give a review (never Python's own wording)."""
    if isinstance(exc, ReviewError | NotJson):
        return str(exc)
    if isinstance(exc, RecursionError):
        return "the body is not JSON this server reads: nested too deeply"
    if "digits" in str(exc):  # Python's limit on int(): 4300 digits
        return "the body is not JSON this server reads: an integer of more than 4300 digits"
    return "the body is not JSON"


class ReviewHandler(BaseHTTPRequestHandler):
    """Routes of the review server; ``server.files`` is the review's ``ReviewFiles``."""

    server: ReviewServer
    default_request_version = "HTTP/1.0"  # an error before the version is read still has a status line
    timeout = 30  # seconds a client may stay silent mid-request before its connection is closed

    # --- plumbing ---

    def _send(
        self,
        status: int,
        body: bytes,
        ctype: str,
        headers: dict[str, str] | None = None,
        cache_control: str = "no-store",
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        if status != HTTPStatus.NOT_MODIFIED:  # a 304 has no body, and no length of one
            self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", cache_control)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Content-Security-Policy", CSP)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, data: Any) -> None:
        self._send(status, json.dumps(data, ensure_ascii=False).encode(), "application/json; charset=utf-8")

    def _token(self) -> tuple[str | None, bool]:
        """(the reviewer token of this request, whether it came as a Bearer header rather than the
        cookie a browser adds by itself)."""
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Bearer "):
            return auth[7:].strip(), True
        return self._cookie(), False

    def _cookie(self) -> str | None:
        try:
            cookie = SimpleCookie(self.headers.get("Cookie", ""))
        except CookieError:
            return None
        return cookie[COOKIE].value if COOKIE in cookie else None

    def _reviewer(self, *, saving: bool = False) -> str | None:
        """The reviewer of this request, or None after answering 401 (no token) / 403 (unknown, or a
        cookie without its session's CSRF token when ``saving``)."""
        token, bearer = self._token()
        if not token:
            self._json(HTTPStatus.UNAUTHORIZED, {"error": "no token: open the link you were given"})
            return None
        name = reviewer_for(self.server.files, token)
        if name is None:
            self._json(HTTPStatus.FORBIDDEN, {"error": "unknown token"})
            return None
        if saving and not bearer:
            sent = self.headers.get(CSRF_HEADER, "")
            if not hmac.compare_digest(sent.encode(), csrf_token(self.server.files.secret(), token).encode()):
                self._json(
                    HTTPStatus.FORBIDDEN, {"error": f"missing or wrong {CSRF_HEADER}: reload the page"}
                )
                return None
        return name

    def _forged(self, api: bool) -> str | None:
        """Why this request may come from another site (refused 403), or None. Every request must name a
        Host the server was started with (a DNS-rebinding page names its own); an API call must come from
        this origin when the browser says where it comes from (Origin; Sec-Fetch-Site)."""
        host = (self.headers.get("Host") or "").strip().lower()
        if host not in self.server.allowed_hosts:
            return f"Host {host[:80]!r} is not this server's (start it with --name to allow a name)"
        if not api:
            return None
        origin = self.headers.get("Origin")
        if origin is not None and origin.strip().lower() != f"http://{host}":
            return f"cross-origin request from {origin[:80]!r}"
        site = self.headers.get("Sec-Fetch-Site")
        if site is not None and site.strip().lower() not in ("same-origin", "none"):
            return f"cross-site request (Sec-Fetch-Site: {site[:20]})"
        return None

    def _unit(self, unit_id: str) -> dict[str, Any] | None:
        return next((u for u in reviewable_queue(self.server.files) if u["unit"] == unit_id), None)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (http.server's name)
        """Log without the query string (the first visit's address carries the reviewer's token); never
        raises, also for a request line that never parsed (no command, no path)."""
        path = getattr(self, "path", None)
        shown = urlsplit(path).path[:200] if isinstance(path, str) else "(no path: bad request line)"
        log.debug("%s %s", getattr(self, "command", None) or "-", shown)

    # --- routes ---

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        url = urlsplit(self.path)
        forged = self._forged(api=url.path.startswith("/api/"))
        if forged is not None:
            self._json(HTTPStatus.FORBIDDEN, {"error": forged})
            return
        if url.path == "/":
            token = parse_qs(url.query).get("token", [None])[0]
            if token is not None:
                if reviewer_for(self.server.files, token) is None:
                    self._json(HTTPStatus.FORBIDDEN, {"error": "unknown token"})
                    return
                cookie = f"{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"
                self._send(HTTPStatus.SEE_OTHER, b"", "text/plain", {"Location": "/", "Set-Cookie": cookie})
                return
            self._send(HTTPStatus.OK, self._page(), "text/html; charset=utf-8")
            return
        if url.path == "/favicon.ico":
            self._send(HTTPStatus.NO_CONTENT, b"", "image/x-icon")
            return
        if url.path.startswith(PREFIX):
            self._tile(url.path)
            return
        vendored = static_file(url.path)
        if vendored is not None:
            self._send(HTTPStatus.OK, vendored[0], vendored[1], cache_control="public, max-age=86400")
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
            self._json(
                HTTPStatus.OK, blinded(unit) | {"review": _public(own), "dzi": dzi_url(unit["wsi_path"])}
            )

    def _tile(self, path: str) -> None:
        """A deep zoom descriptor or tile of a queued slide, for a reviewer (401/403 as the API)."""
        if self._reviewer() is None:
            return
        answer = self.server.tiles.answer(path, self.headers.get("If-None-Match"))
        self._send(answer.status, answer.body, answer.content_type, answer.headers, answer.cache_control)

    def do_POST(self) -> None:  # noqa: N802
        """Save a review: only from this origin, as JSON, with the session's CSRF token (see the module
        docstring); the body (at most MAX_BODY) is read whole, then checked before anything is stored."""
        url = urlsplit(self.path)
        text = self.headers.get("Content-Length", "")
        length = int(text) if text.isascii() and text.isdigit() and len(text) < 12 else -1
        if not 0 < length <= MAX_BODY:
            self._json(HTTPStatus.BAD_REQUEST, {"error": f"a JSON body of 1..{MAX_BODY} bytes is needed"})
            return
        body = self.rfile.read(length)  # read before any answer: an unread body can reset the connection
        if not url.path.startswith("/api/review/"):
            self._json(HTTPStatus.NOT_FOUND, {"error": "not found"})
            return
        forged = self._forged(api=True)
        if forged is not None:
            self._json(HTTPStatus.FORBIDDEN, {"error": forged})
            return
        if (self.headers.get("Content-Type") or "").split(";")[0].strip().lower() != "application/json":
            self._json(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, {"error": "a review is sent as application/json"})
            return
        reviewer = self._reviewer(saving=True)
        if reviewer is None:
            return
        unit = self._unit(url.path.rsplit("/", 1)[1])
        if unit is None:
            self._json(HTTPStatus.NOT_FOUND, {"error": "no such unit"})
            return
        if unit["shown"].get("slide_size") is None:  # the items did not know it: the slide itself does
            size = self.server.tiles.size(slide_key(unit["wsi_path"]))
            if size is not None:
                unit = unit | {"shown": unit["shown"] | {"slide_size": list(size)}}
        try:
            review = validate_review(unit, json.loads(body, parse_constant=_reject_constant))
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, not UTF-8, 5,000 digits, too deep
            self._json(HTTPStatus.BAD_REQUEST, {"error": _body_error(exc)})
            return
        record = append_review(self.server.files, reviewer, unit["unit"], review)
        self._json(HTTPStatus.OK, {"saved": True, "submitted_at": record["submitted_at"]})

    def _page(self) -> bytes:
        """The page, carrying the session's CSRF token when the request has a reviewer's cookie."""
        page = _static("review.html")
        token = self._cookie()
        if token and reviewer_for(self.server.files, token) is not None:
            filled = f'<meta name="review-csrf" content="{csrf_token(self.server.files.secret(), token)}">'
            page = page.replace(CSRF_MARKER, filled.encode())
        return page

    def _queue(self, reviewer: str) -> None:
        done = {unit for (who, unit) in latest_reviews(read_reviews(self.server.files)[0]) if who == reviewer}
        units = order_for(self.server.files, reviewer, reviewable_queue(self.server.files))
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
        except InvalidRegion as exc:  # a region queued before prepare checked regions: outside the slide
            self._json(HTTPStatus.NOT_FOUND, {"error": f"region not shown: {exc}"})
            return
        finally:
            slide.close()
        buffer = io.BytesIO()
        image.convert("RGB").save(buffer, fmt)
        self._send(HTTPStatus.OK, buffer.getvalue(), ctype)


def _public(record: dict[str, Any] | None) -> dict[str, Any] | None:
    if record is None:
        return None
    return {k: record[k] for k in ("regions", "answer", "supports", "drawn", "comment", "submitted_at")}


class ReviewServer(BurstHTTPServer):
    """The review server on ``host``:``port``; requests must name it by one of ``allowed_hosts``: the
    address it listens on, the loopback names when that is a loopback address, and ``names`` (each with
    the port it listens on)."""

    def __init__(
        self, files: ReviewFiles, host: str = "127.0.0.1", port: int = DEFAULT_PORT, names: Iterable[str] = ()
    ) -> None:
        self.files = files
        super().__init__((host, port), ReviewHandler)
        self.allowed_hosts = allowed_hosts(host, self.server_address[1], names)
        self.tiles = SlideTiles(self._queued_slide, cache_control=REVALIDATE)  # a revoked token: no tile

    def _queued_slide(self, key: str) -> str | None:
        """The slide path of ``key`` among the reviewable units' slides, else None."""
        return next(
            (u["wsi_path"] for u in reviewable_queue(self.files) if slide_key(u["wsi_path"]) == key), None
        )

    def server_close(self) -> None:
        super().server_close()
        self.tiles.close()


def serve_in_thread(files: ReviewFiles, port: int = 0) -> tuple[ReviewServer, threading.Thread]:
    """Start a loopback server in a daemon thread (tests); ``server.shutdown()`` stops it."""
    server = ReviewServer(files, port=port)
    thread = threading.Thread(target=server.serve_forever, name="giant-review", daemon=True)
    thread.start()
    return server, thread
