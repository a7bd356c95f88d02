"""``giant-view``: serve the trajectory viewer (``data/viewer``) on loopback, drawing an item page's
missing pictures the first time it is opened (``lazy.render_pending``) and keeping them (a cache on
disk: later visits are static files).

    giant-view                          # http://127.0.0.1:8765/, the folder $GIANT_DATA_DIR/viewer
    (Ctrl-C or SIGTERM stops it)
    giant-view --port 9000 --dir /data/viewer

It also serves deep zoom (``report.slide_tiles``): ``/slides/<key>.dzi`` and its tiles, read from the
slides the viewer's pages show (the keys its site build wrote to ``<experiment>/_slides/``), and
OpenSeadragon under ``/static/vendor/`` when ``make`` installed it.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import time
from collections.abc import Iterable
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from giant_assets.core.helptext import plain
from giant_assets.core.serving import allowed_hosts, port_number, serve_until_stopped
from giant_assets.core.settings import DATA_DIR_ENV, env
from giant_assets.report.slide_tiles import PREFIX, SlideTiles
from giant_assets.report.vendor import SCRIPT_URL, URL_PREFIX, static_file
from giant_assets.report.viewer.lazy import render_pending
from giant_assets.report.viewer.site import RECIPE, SLIDES_DIR

DEFAULT_PORT = 8765
log = logging.getLogger("giant.view")


class SiteSlides:
    """Key -> slide path of every slide the viewer's pages show (``<experiment>/_slides/*.json``,
    written by the site build); read again on an unknown key, at most once a second."""

    def __init__(self, folder: Path) -> None:
        self._folder, self._paths, self._read_at = folder, {}, float("-inf")
        self._lock = threading.Lock()

    def __call__(self, key: str) -> str | None:
        with self._lock:
            if key not in self._paths and time.monotonic() - self._read_at >= 1.0:
                self._paths = self._read()
                self._read_at = time.monotonic()
            return self._paths.get(key)

    def _read(self) -> dict[str, str]:
        paths: dict[str, str] = {}
        for mapping in sorted(self._folder.glob(f"*/{SLIDES_DIR}/*.json")):
            try:
                found = json.loads(mapping.read_text(encoding="utf-8"))
            except (OSError, ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
                log.warning("deep zoom: cannot read %s: %s", mapping, type(exc).__name__)
                continue
            if isinstance(found, dict):
                paths.update({k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str)})
        return paths


class ViewerHandler(SimpleHTTPRequestHandler):
    """Static files of the viewer's folder; an item page with a render recipe is drawn first; deep zoom
    tiles and OpenSeadragon's files from ``server.tiles`` and the vendor folder."""

    server: ViewerServer

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self._foreign_host() or self._deep_zoom():
            return
        if not self._refused():
            self._render_if_pending()
            super().do_GET()

    def do_HEAD(self) -> None:  # noqa: N802
        if self._foreign_host() or self._deep_zoom():
            return
        if not self._refused():
            self._render_if_pending()
            super().do_HEAD()

    def _foreign_host(self) -> bool:
        """Refuse (403) a request naming a Host this server was not started with: a DNS-rebinding page
        names its own, and would otherwise read the trajectories and the slides' tiles."""
        host = (self.headers.get("Host") or "").strip().lower()
        if host in self.server.allowed_hosts:
            return False
        why = f"Host {host[:80]!r} is not this server's (start it with --name to allow a name)"
        self.send_error(403, why)
        return True

    def _deep_zoom(self) -> bool:
        """Answer a tile, a descriptor or an OpenSeadragon file; False for any other path."""
        path = self.path.split("?", 1)[0].split("#", 1)[0]
        if path.startswith(PREFIX):
            answer = self.server.tiles.answer(path, self.headers.get("If-None-Match"))
            self._send(answer.status, answer.body, answer.content_type, answer.cache_control, answer.headers)
            return True
        if path.startswith(URL_PREFIX) or path == SCRIPT_URL:
            found = static_file(path)
            if found is None:
                self.send_error(404, "File not found (deep zoom: run make to install OpenSeadragon)")
            else:
                self._send(200, found[0], found[1], "public, max-age=86400")
            return True
        return False

    def _send(
        self, status: int, body: bytes, ctype: str, cache_control: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        if status != 304:  # a 304 has no body, and no length of one
            self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", cache_control)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _refused(self) -> bool:
        """A path no file can have is answered here: a NUL byte (``%00``) 400, a name the file system
        refuses (too long: thousands of segments) 404, instead of an exception and a dropped connection;
        the slide-key files (``_slides/``, paths on this machine) are not served."""
        path = self.translate_path(self.path)
        if SLIDES_DIR in Path(path).parts:
            self.send_error(404, "File not found")
            return True
        if "\0" in path:
            self.send_error(400, "Bad request path (NUL byte)")
            return True
        try:
            Path(path).is_dir()
        except (OSError, ValueError):
            self.send_error(404, "File not found")
            return True
        return False

    def _render_if_pending(self) -> None:
        path = Path(self.translate_path(self.path))  # decoded once and confined to the folder, as served
        page_dir = path if path.is_dir() else path.parent
        if path.name not in ("", "index.html") and not path.is_dir():
            return
        if not (page_dir / RECIPE).is_file():
            return
        try:
            done = render_pending(page_dir)
        except Exception as exc:  # a broken slide must not take the server down: the page shows as it is
            log.warning("could not draw the pictures of %s: %s", page_dir, exc)
            return
        if done is not None:
            log.info(
                "drew %d runs (%d pictures) of %s in %.0f ms",
                done.runs, done.pictures, page_dir, 1000 * done.seconds,
            )  # fmt: skip

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (http.server's name)
        log.debug(format, *args)


class ViewerServer(ThreadingHTTPServer):
    """The viewer's server; ``tiles`` answers its deep zoom requests."""

    def __init__(self, folder: Path, host: str, port: int, names: Iterable[str] = ()) -> None:
        super().__init__((host, port), partial(ViewerHandler, directory=str(folder)))
        self.allowed_hosts = allowed_hosts(host, self.server_address[1], names)
        self.tiles = SlideTiles(SiteSlides(folder))

    def server_close(self) -> None:
        super().server_close()
        self.tiles.close()


def make_server(
    folder: Path, port: int = DEFAULT_PORT, host: str = "127.0.0.1", names: Iterable[str] = ()
) -> ViewerServer:
    """A server of ``folder`` (not started); ``port`` 0 picks a free one (``server.server_address``);
    requests must name it as ``host``, a loopback name when ``host`` is loopback, or one of ``names``."""
    return ViewerServer(folder, host, port, names)


def serve_in_thread(folder: Path, port: int = 0) -> tuple[ViewerServer, threading.Thread]:
    """Start serving ``folder`` in a daemon thread (tests, notebooks); ``server.shutdown()`` stops it."""
    server = make_server(folder, port)
    thread = threading.Thread(target=server.serve_forever, name="giant-view", daemon=True)
    thread.start()
    return server, thread


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="giant-view", description=plain(__doc__.split("\n\n")[0]))
    default_dir = Path(env(DATA_DIR_ENV) or "data") / "viewer"
    parser.add_argument(
        "--dir", type=Path, default=default_dir, help=f"the viewer folder (default {default_dir})"
    )
    parser.add_argument(
        "--port", type=port_number, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})"
    )
    parser.add_argument("--bind", default="127.0.0.1", help="address (default 127.0.0.1: this machine only)")
    parser.add_argument(
        "--name",
        action="append",
        default=[],
        help="a host name browsers use to reach the server (repeat); requests naming any other host are "
        "refused (loopback names are allowed when serving loopback)",
    )
    args = parser.parse_args(argv)
    if not args.dir.is_dir():
        print(
            f"giant-view: no folder {args.dir}: run make demo or materialize trajectory_viewer",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    try:
        server = make_server(args.dir, args.port, args.bind, args.name)
    except OSError as exc:
        print(f"giant-view: cannot listen on {args.bind}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    host, port = server.server_address[:2]
    print(f"trajectory viewer: http://{host}:{port}/ (Ctrl-C stops; pictures are drawn on first visit)")
    print(f"remote machine: ssh -L {port}:127.0.0.1:{port} <host>", flush=True)
    serve_until_stopped(server)
    return 0


if __name__ == "__main__":
    sys.exit(main())
