"""``giant-review``: a blinded pathologist review of agent runs, in the browser.

giant-review add-reviewer ana                  # prints ana's token and link (shown once)
giant-review prepare --experiment demo-giant --benchmark tcga   # add these runs to the queue
giant-review serve                             # http://127.0.0.1:8766/ (Ctrl-C stops it)
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from giant_assets.benchmarks.registry import benchmark_arg
from giant_assets.core.helptext import plain
from giant_assets.core.serving import port_number, serve_until_stopped
from giant_assets.core.settings import data_dir
from giant_assets.core.storage import ParquetStore
from giant_assets.eval.qupath import read_reported_regions, stored_reported_regions
from giant_assets.eval.reviews import (
    REVIEW_FOLDER,
    ReviewError,
    ReviewFiles,
    add_reviewer,
    build_units,
    left_out_reason,
    old_demo_note,
    write_queue,
)
from giant_assets.report.review.serve import DEFAULT_PORT, ReviewServer

SHOWN_REFUSED = 20  # refused reported regions listed by name; the rest counted


def prepare(
    root: Path, files: ReviewFiles, experiments: list[str], benchmark: str, reported: Path | None = None
) -> str:
    store = ParquetStore(root)
    if not store.partitions("benchmark_items"):
        raise ReviewError(f"no benchmark_items under {root}: materialize it first")
    items = store.read("benchmark_items")
    # each region is checked by build_units: a bad one is refused alone, the rest kept
    given = read_reported_regions(reported, benchmark, check=False) if reported else None
    units: list[dict] = []
    refused: list[str] = []
    for experiment in experiments:
        cell = f"{experiment}/{benchmark}"
        if cell not in store.partitions("predictions"):
            raise ReviewError(f"no predictions for {cell} under {root}: materialize that cell first")
        runs = store.read("predictions", [cell])
        if given is None:  # a path-review experiment's stored regions; none for another agent
            mine = stored_reported_regions(store, experiment, benchmark)
        else:
            mine = [r for r in given if r.get("experiment", experiment) == experiment]
        before = len(refused)
        units += build_units(files.secret(), experiment, runs, items, reported=mine, refused=refused)
        refused[before:] = [f"{experiment}: {line}" for line in refused[before:]]
    reasons = Counter(left_out_reason(u) for u in units)
    units = [u for u in units if left_out_reason(u) is None]
    total = write_queue(files, units)
    summary = f"added {len(units)} run(s) of {', '.join(experiments)} on {benchmark}; the queue holds {total}"
    left_out = {why: n for why, n in reasons.items() if why is not None}
    if left_out:
        listed = ", ".join(f"{n} {why}" for why, n in sorted(left_out.items()))
        summary += f"\nleft out {sum(left_out.values())} run(s) that cannot be reviewed: {listed}"
    if refused:
        shown = "".join(f"\n  {line}" for line in refused[:SHOWN_REFUSED])
        more = f"\n  ... and {len(refused) - SHOWN_REFUSED} more" if len(refused) > SHOWN_REFUSED else ""
        summary += f"\nrefused {len(refused)} reported region(s) (left out, the rest kept):{shown}{more}"
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="giant-review", description=plain(__doc__.split("\n\n")[0]))
    parser.add_argument("--data-dir", type=Path, help="the data folder (default $GIANT_DATA_DIR or ./data)")
    sub = parser.add_subparsers(dest="command", required=True)
    add = sub.add_parser("add-reviewer", help="register a reviewer (again: a new token)")
    add.add_argument("name")
    prep = sub.add_parser("prepare", help="add an experiment's runs on a benchmark to the queue")
    prep.add_argument("--experiment", action="append", required=True, help="repeat to mix experiments")
    prep.add_argument("--benchmark", required=True, type=benchmark_arg)
    prep.add_argument(
        "--reported",
        type=Path,
        help="instead of the stored path_review_regions (read by default, shown instead of a path-review "
        "run's crops): a JSON list of {benchmark_id, run_index, box, finding, experiment}",
    )
    serve = sub.add_parser("serve", help="serve the review pages")
    serve.add_argument("--port", type=port_number, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    serve.add_argument(
        "--host", default="127.0.0.1", help="default loopback; another address serves the network"
    )
    serve.add_argument(
        "--name",
        action="append",
        default=[],
        help="a host name reviewers use to reach the server (repeat); requests naming any other host "
        "are refused (loopback names are allowed when serving loopback)",
    )
    args = parser.parse_args(argv)
    root = args.data_dir.expanduser().resolve() if args.data_dir else data_dir()
    files = ReviewFiles(root / REVIEW_FOLDER)
    try:
        if args.command == "add-reviewer":
            token = add_reviewer(files, args.name)
            print(f"{args.name}: token {token}\nlink: http://127.0.0.1:{DEFAULT_PORT}/?token={token}")
        elif args.command == "prepare":
            print(prepare(root, files, args.experiment, args.benchmark, args.reported))
        if args.command != "add-reviewer" and (note := old_demo_note(files)) is not None:
            print(note, flush=True)
        if args.command == "serve":
            server = ReviewServer(files, args.host, args.port, args.name)
            host, port = server.server_address[:2]
            print(f"review: http://{host}:{port}/ (reviewers open their link once)", flush=True)
            serve_until_stopped(server)
    except (ValueError, OSError) as exc:
        print(f"giant-review: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
