"""Deep Zoom tiles over HTTP, shared by ``giant-view`` and ``giant-review serve``.

    GET /slides/<key>.dzi                          the descriptor (XML)
    GET /slides/<key>_files/<level>/<col>_<row>.jpeg   one tile

A key is opaque (``slide_key``: a digest of the slide's resolved path, never the path): the server
answers only keys of slides the platform already resolved (``resolve``: the viewer's pages, the review's
queue), so no request names a file. Level, column and row are short decimal numbers checked against the
slide's pyramid (anything else is 404). Open slides and encoded tiles are kept in LRU caches.

Every descriptor and tile carries an ``ETag`` (a digest of its bytes) and is answered ``304 Not
Modified`` to a request whose ``If-None-Match`` names it. ``giant-view`` lets a browser reuse them for an
hour (``CACHED``); ``giant-review`` makes it ask every time (``REVALIDATE``: ``no-cache``), so a
revalidation passes the reviewer's token and the Host check again and a revoked token sees no more
tiles, while a valid one gets a body-less 304.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from giant_assets.slides.deepzoom import DeepZoomSlide, NoSuchTile
from giant_assets.slides.formats import SlideError

PREFIX = "/slides/"
KEY_CHARS = 24
_DZI = re.compile(rf"^/slides/([0-9a-f]{{{KEY_CHARS}}})\.dzi$")
_TILE = re.compile(rf"^/slides/([0-9a-f]{{{KEY_CHARS}}})_files/(\d{{1,2}})/(\d{{1,6}})_(\d{{1,6}})\.jpeg$")
OPEN_SLIDES = 8  # slides kept open
TILE_CACHE_BYTES = 64 << 20  # encoded tiles kept in memory
TILE_MAX_AGE = 3600  # seconds a browser may reuse a tile or a descriptor (Cache-Control)
CACHED = f"private, max-age={TILE_MAX_AGE}"  # giant-view: no token to revoke
REVALIDATE = "private, no-cache"  # giant-review: kept, but asked for again (token checked) before each use
log = logging.getLogger("giant.tiles")


def slide_key(wsi_path: str) -> str:
    """The opaque key of a slide in tile URLs: the first KEY_CHARS hex digits of its path's SHA-256."""
    return hashlib.sha256(str(wsi_path).encode("utf-8")).hexdigest()[:KEY_CHARS]


def dzi_url(wsi_path: str) -> str:
    """The descriptor URL of a slide, as the pages name it."""
    return f"{PREFIX}{slide_key(wsi_path)}.dzi"


@dataclass(frozen=True)
class Answer:
    """An HTTP answer: status, body, content type, Cache-Control and the body's ETag (or None)."""

    status: int
    body: bytes
    content_type: str
    cache_control: str = "no-store"
    etag: str | None = None

    @property
    def headers(self) -> dict[str, str]:
        """The headers to send besides Content-Type and Cache-Control."""
        return {} if self.etag is None else {"ETag": self.etag}


def entity_tag(body: bytes) -> str:
    """A strong ETag of ``body``: a quoted digest of its bytes (names no slide, no path)."""
    return '"' + hashlib.blake2b(body, digest_size=16).hexdigest() + '"'


def names_tag(if_none_match: str | None, etag: str) -> bool:
    """Whether an ``If-None-Match`` header names ``etag`` (or is ``*``); weak tags compare equal."""
    if not if_none_match:
        return False
    listed = {t.strip().removeprefix("W/") for t in if_none_match[:4096].split(",")}
    return "*" in listed or etag in listed


def _not_found(what: str) -> Answer:
    return Answer(404, f"{what}\n".encode(), "text/plain; charset=utf-8")


class SlideTiles:
    """Answers ``/slides/`` requests for the slides ``resolve`` knows (key -> slide path, or None)."""

    def __init__(
        self,
        resolve: Callable[[str], str | None],
        open_slides: int = OPEN_SLIDES,
        tile_bytes: int = TILE_CACHE_BYTES,
        cache_control: str = CACHED,
    ) -> None:
        self._resolve = resolve
        self._cache_control = cache_control
        self._max_open, self._max_bytes = open_slides, tile_bytes
        self._slides: OrderedDict[str, DeepZoomSlide] = OrderedDict()
        self._tiles: OrderedDict[tuple[str, int, int, int], bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.reads = 0  # tiles read from a slide (not from the cache)

    def answer(self, path: str, if_none_match: str | None = None) -> Answer:
        """The answer to GET ``path`` (the URL's path, not decoded), which starts with PREFIX: 304 with
        no body when ``if_none_match`` (the request's header) names the ETag of what would be sent."""
        tile = _TILE.match(path)
        dzi = None if tile else _DZI.match(path)
        if not (tile or dzi):
            return _not_found(
                "not a Deep Zoom URL: /slides/<key>.dzi or /slides/<key>_files/<level>/<col>_<row>.jpeg"
            )
        key = (tile or dzi).group(1)  # type: ignore[union-attr]
        if tile:
            address = (key, int(tile.group(2)), int(tile.group(3)), int(tile.group(4)))
            with self._lock:
                cached = self._tiles.get(address)
                if cached is not None:
                    self._tiles.move_to_end(address)
                    return self._ok(cached, "image/jpeg", if_none_match)
        slide = self._slide(key)
        if slide is None:
            return _not_found("no such slide")
        if dzi:
            return self._ok(slide.descriptor(), "application/xml", if_none_match)
        try:
            data = slide.tile(*address[1:])
        except NoSuchTile as exc:
            return _not_found(str(exc))
        except Exception as exc:  # a damaged slide, or one closed by the LRU meanwhile: this tile only
            log.warning("deep zoom: tile %s of %s: %s", path, key, type(exc).__name__)
            self._forget(key, slide)  # OpenSlide keeps a handle in error for good: reopen it next time
            return Answer(503, b"the tile could not be read; retry\n", "text/plain; charset=utf-8")
        self._keep(address, data)
        return self._ok(data, "image/jpeg", if_none_match)

    def _ok(self, body: bytes, content_type: str, if_none_match: str | None) -> Answer:
        etag = entity_tag(body)
        if names_tag(if_none_match, etag):
            return Answer(304, b"", content_type, self._cache_control, etag)
        return Answer(200, body, content_type, self._cache_control, etag)

    def size(self, key: str) -> tuple[int, int] | None:
        """Level-0 width and height of the slide of ``key``, or None when there is no such slide."""
        slide = self._slide(key)
        return None if slide is None else slide.size

    def _slide(self, key: str) -> DeepZoomSlide | None:
        """The open slide of ``key`` (opened on first use, least recently used closed), or None."""
        with self._lock:
            if key in self._slides:
                self._slides.move_to_end(key)
                return self._slides[key]
        path = self._resolve(key)
        if path is None:
            return None
        try:
            slide = DeepZoomSlide.open(path)
        except SlideError as exc:
            log.warning("deep zoom: %s", exc)
            return None
        evicted = []
        with self._lock:
            if key in self._slides:  # opened by another thread meanwhile
                evicted.append(slide)
                slide = self._slides[key]
            else:
                self._slides[key] = slide
            while len(self._slides) > self._max_open:
                evicted.append(self._slides.popitem(last=False)[1])
        for old in evicted:  # outside the lock: close waits for the reads under way
            old.close()
        return slide

    def _forget(self, key: str, slide: DeepZoomSlide) -> None:
        """Close ``slide`` and drop it, unless another thread already replaced it."""
        with self._lock:
            if self._slides.get(key) is not slide:
                return
            del self._slides[key]
        slide.close()

    def _keep(self, address: tuple[str, int, int, int], data: bytes) -> None:
        with self._lock:
            self.reads += 1
            if address not in self._tiles:
                self._tiles[address] = data
                self._bytes += len(data)
            while self._bytes > self._max_bytes and self._tiles:
                _, old = self._tiles.popitem(last=False)
                self._bytes -= len(old)

    def close(self) -> None:
        """Close every open slide."""
        with self._lock:
            slides = list(self._slides.values())
            self._slides.clear()
        for slide in slides:
            slide.close()
