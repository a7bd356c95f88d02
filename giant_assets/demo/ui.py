"""``make ui``: the Dagster UI and daemon, plus the demo's scripted model, until Ctrl-C or SIGTERM.

``dagster dev`` starts a webserver and a daemon; Dagster 1.13 marks it superseded by ``dg dev``, which
needs another package (dagster-dg-cli) and a ``dg`` project layout this repository does not use. So
this runs the two commands ``dagster dev`` runs, ``dagster-webserver`` and ``dagster-daemon run`` (as a
deployment runs them), over ``workspace.yaml``, and serves the scripted model on the port the
``demo-*`` experiments name, so they can be re-run from the UI (a taken port, e.g. by a running
``make demo``, is reported and taken over once it is free). A throwaway ``GIANT_DEMO_API_KEY`` is
set for their runs unless one is. The instance's databases are created before the two start: on a fresh
``DAGSTER_HOME`` both would create them at the same moment and one could fail (alembic: "more than one
head").

    python -m giant_assets.demo.ui [-w workspace.yaml] [--host 127.0.0.1] [--port 3000] [--model-port N]
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import threading
from pathlib import Path

from giant_assets.core.settings import DAGSTER_HOME_ENV, DEMO_KEY_ENV
from giant_assets.demo.serve_cli import DEMO_PORT, DemoModelServer

STOP_WAIT_S = 20.0
RETRY_TICKS = 2  # a taken model port is tried again every 2 x 0.5 s (a bind: cheap)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="make ui", description=__doc__.splitlines()[0])
    parser.add_argument("-w", "--workspace", default="workspace.yaml", help="Dagster workspace file")
    parser.add_argument("--host", default="127.0.0.1", help="the UI's address (default loopback only)")
    parser.add_argument("--port", type=int, default=3000, help="the UI's port (default 3000)")
    parser.add_argument(
        "--model-port",
        type=int,
        default=DEMO_PORT,
        help=f"the scripted model's port (default {DEMO_PORT}; -1: none)",
    )
    return parser


def _start_model(port: int, quiet: bool = False) -> DemoModelServer | None:
    """The scripted model on ``port``; None when the port is taken (reported unless ``quiet``)."""
    try:
        model = DemoModelServer(port=port).start()
    except OSError as exc:
        if not quiet:
            print(
                f"scripted model: 127.0.0.1:{port} is taken ({exc.strerror}); the demo-* experiments use "
                "whatever serves it, and this takes the port over once it is free",
                flush=True,
            )
        return None
    print(f"scripted model: {model.openai_base_url} (the demo-* experiments' base_url)", flush=True)
    return model


def create_storage(home: str | os.PathLike[str]) -> None:
    """Create the SQLite storages of the Dagster instance in ``home`` (runs, event log index, schedules),
    as its first user would: processes starting together on a fresh home otherwise race to create them."""
    from dagster import DagsterInstance  # ~1 s of imports, paid only here
    from dagster._core.instance.ref import InstanceRef

    with DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        instance.get_runs(limit=1)  # history/runs.db
        instance.event_log_storage.get_asset_records()  # history/runs/index.db
        instance.all_instigator_state()  # schedules/schedules.db


def _stop(children: dict[str, subprocess.Popen]) -> None:
    for process in children.values():
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for name, process in children.items():
        try:
            process.wait(timeout=STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            print(f"{name} did not stop in {STOP_WAIT_S:.0f} s: killed", flush=True)
            process.kill()
            process.wait()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    env = dict(os.environ)
    env.setdefault(DEMO_KEY_ENV, f"sk-demo-{secrets.token_hex(16)}")
    bin_dir = Path(sys.executable).parent
    home = env.get(DAGSTER_HOME_ENV, "")
    if home and Path(home).is_dir():  # else nothing to share: the webserver and daemon say what is wrong
        create_storage(home)
    model = _start_model(args.model_port) if args.model_port >= 0 else None
    children = {
        "dagster-webserver": subprocess.Popen(
            [bin_dir / "dagster-webserver", "-w", args.workspace, "-h", args.host, "-p", str(args.port)],
            env=env,
        ),
        "dagster-daemon": subprocess.Popen(
            # warnings and errors only: at info it logs a line per sensor tick (every 15-30 s)
            [bin_dir / "dagster-daemon", "run", "-w", args.workspace, "--log-level", "warning"],
            env=env,
        ),
    }
    print(f"Dagster UI: http://{args.host}:{args.port} (and its daemon); Ctrl-C stops them", flush=True)
    failed, ticks = None, 0
    try:
        while not stop.wait(0.5) and failed is None:
            failed = next((n for n, p in children.items() if p.poll() is not None), None)
            ticks += 1
            if model is None and args.model_port >= 0 and ticks % RETRY_TICKS == 0:  # a demo held it
                model = _start_model(args.model_port, quiet=True)
    finally:
        _stop(children)
        if model is not None:
            model.stop()
    if failed:
        print(f"{failed} exited with {children[failed].returncode}: stopped the others", file=sys.stderr)
        return 1
    print("stopped: Dagster UI, daemon" + (", scripted model" if model else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
