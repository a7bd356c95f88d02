"""Loopback HTTP servers in the foreground until Ctrl-C or SIGTERM (giant-view, giant-review): a port
argument checked by argparse, a listen backlog that takes a burst of clients, and a clean stop."""

from __future__ import annotations

import argparse
import ipaddress
import signal
import socketserver
import sys
from collections.abc import Iterable
from http.server import ThreadingHTTPServer

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
BACKLOG = 1024  # connections the kernel queues before accept(); the default 5 drops a burst's SYNs


class BurstHTTPServer(ThreadingHTTPServer):
    """A thread per request, daemon threads, and a listen backlog of BACKLOG (capped by the kernel's
    ``net.core.somaxconn``): a burst of clients waits in the queue instead of timing out."""

    daemon_threads = True
    request_queue_size = BACKLOG


def port_number(text: str) -> int:
    """argparse type of a TCP port: 0 (any free one) to 65535, else a usage error naming the value."""
    try:
        port = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:20]!r} is not a port number (0..65535)") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text[:20]} is not a port number (0..65535)")
    return port


def serve_until_stopped(server: socketserver.BaseServer) -> None:
    """Serve until Ctrl-C or SIGTERM (both end cleanly, exit code 0), then close the listening socket."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def allowed_hosts(host: str, port: int, names: Iterable[str] = ()) -> frozenset[str]:
    """The Host header values a request to this server may carry (lower case, with the port)."""
    shown = f"[{host}]" if ":" in host else host
    chosen = {shown.lower(), *(n.strip().lower() for n in names)}
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host.lower() == "localhost"
    if loopback:
        chosen |= set(LOOPBACK_NAMES)
    chosen -= {"0.0.0.0", "[::]"}  # a wildcard address is no name a browser uses
    hosts = {f"{name}:{port}" for name in chosen}
    return frozenset(hosts | (chosen if port == 80 else set()))
