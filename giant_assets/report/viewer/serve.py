"""``giant-view``: serve the trajectory viewer (``data/viewer``) on loopback, drawing an item page's
missing pictures the first time it is opened (``lazy.render_pending``) and keeping them (a cache on
disk: later visits are static files).

    giant-view                          # http://127.0.0.1:8765/, the folder $GIANT_DATA_DIR/viewer
    (Ctrl-C or SIGTERM stops it)
    giant-view --port 9000 --dir /data/viewer
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from giant_assets.core.helptext import plain
from giant_assets.core.serving import port_number, serve_until_stopped
from giant_assets.core.settings import DATA_DIR_ENV, env
from giant_assets.report.viewer.lazy import render_pending
from giant_assets.report.viewer.site import RECIPE

DEFAULT_PORT = 8765
log = logging.getLogger("giant.view")


class ViewerHandler(SimpleHTTPRequestHandler):
    """Static files of the viewer's folder; an item page with a render recipe is drawn first."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if not self._refused():
            self._render_if_pending()
            super().do_GET()

    def do_HEAD(self) -> None:  # noqa: N802
        if not self._refused():
            self._render_if_pending()
            super().do_HEAD()

    def _refused(self) -> bool:
        """A path no file can have is answered here: a NUL byte (``%00``) 400, a name the file system
        refuses (too long: thousands of segments) 404, instead of an exception and a dropped connection."""
        path = self.translate_path(self.path)
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


def make_server(folder: Path, port: int = DEFAULT_PORT, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """A server of ``folder`` (not started); ``port`` 0 picks a free one (``server.server_address``)."""
    handler = partial(ViewerHandler, directory=str(folder))
    return ThreadingHTTPServer((host, port), handler)


def serve_in_thread(folder: Path, port: int = 0) -> tuple[ThreadingHTTPServer, threading.Thread]:
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
    args = parser.parse_args(argv)
    if not args.dir.is_dir():
        print(
            f"giant-view: no folder {args.dir}: run make demo or materialize trajectory_viewer",
            file=sys.stderr,
        )
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    try:
        server = make_server(args.dir, args.port, args.bind)
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
