"""Run a loopback HTTP server in the foreground until Ctrl-C or SIGTERM (giant-view, giant-review)."""

from __future__ import annotations

import signal
import socketserver
import sys


def serve_until_stopped(server: socketserver.BaseServer) -> None:
    """Serve until Ctrl-C or SIGTERM (both end cleanly, exit code 0), then close the listening socket."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
