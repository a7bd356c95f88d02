"""``giant-scripted-model``: the demo's scripted model as a server on loopback, until Ctrl-C or SIGTERM.

It answers the three wire formats (OpenAI Responses and Chat Completions at ``<url>/v1``, Anthropic
Messages at ``<url>``) with ``demo_policy``: crop the darkest region of the overview, then answer in
the benchmark's format (the bundled sample's answer when its last view shows the lesion large enough,
else a guess). No key is checked. The ``demo-*`` experiments of ``experiments.yaml`` call it at
``http://127.0.0.1:47321/v1`` (the default port), so they can run from the UI or ``giant-run`` while
it serves (``make ui`` starts one; ``make scripted-model`` runs it alone).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from giant_assets.demo.scripted import RecordedRequest, Reply, ScriptedModelServer, demo_policy

DEMO_PORT = 47321  # the port the demo-* experiments of experiments.yaml name


class DemoModelServer(ScriptedModelServer):
    """The demo model for a long-lived process: answers with ``demo_policy`` and keeps no request
    (a test's server records every body, images included; this one only counts them)."""

    def __init__(self, port: int = DEMO_PORT, latency_s: float = 0.0) -> None:
        super().__init__(rule=demo_policy, latency_s=latency_s, port=port)
        self.served = 0

    def _next_reply(self, request: RecordedRequest) -> Reply:
        reply = super()._next_reply(request)
        with self._lock:
            self.requests.clear()
            self.replies.clear()
            self.served += 1
        return reply


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="giant-scripted-model",
        description="Serve the demo's scripted model on 127.0.0.1 (no key, no network) until Ctrl-C or "
        "SIGTERM. It prints its URL first: give it to an experiment's base_url or giant-run's --base-url.",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=DEMO_PORT,
        help=f"port on 127.0.0.1 (default {DEMO_PORT}, as the demo-* experiments; 0: any free port)",
    )
    parser.add_argument("--latency", type=float, default=0.0, metavar="S", help="seconds each reply waits")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        server = DemoModelServer(port=args.port, latency_s=args.latency).start()
    except OSError as exc:
        print(
            f"giant-scripted-model: cannot listen on 127.0.0.1:{args.port}: {exc.strerror}; is another "
            "giant-scripted-model, `make ui` or `make demo` serving it? Stop it or choose --port.",
            file=sys.stderr,
        )
        return 2
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    print(f"scripted model: {server.openai_base_url} (OpenAI SDKs; Anthropic: {server.base_url})", flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()
    print(f"scripted model: stopped after {server.served} requests", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
