"""`giant-benchmarks`: tools for declared benchmarks.

giant-benchmarks import-patho-bench TASK_FOLDER --out FILE.yaml [--wsi-root DIR] [--fold fold_0]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from giant_assets.benchmarks.patho_bench import SLIDE_SUFFIXES, PathoBenchError, read_task, write_declaration

IMPORT_HELP = (
    "turn a Patho-Bench task folder (config.yaml and the split k=all.tsv) into a benchmark declaration "
    "FILE.yaml and its items FILE.csv: the test split's slides, the label dictionary as options, a "
    "question worded from the task's name and classes"
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="giant-benchmarks", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    imp = commands.add_parser("import-patho-bench", help=IMPORT_HELP, description=IMPORT_HELP)
    imp.add_argument("task", type=Path, help="the task folder, <dataset>/<task>/ as Patho-Bench saves it")
    imp.add_argument("--out", type=Path, required=True, help="the declaration to write (.yaml)")
    imp.add_argument("--name", help="the benchmark's name (default <dataset>-<task>, lower-case)")
    imp.add_argument("--fold", default="fold_0", help="the split column whose 'test' rows are the items")
    imp.add_argument(
        "--wsi-root", type=Path, help="find each slide here by its slide_id (any extension OpenSlide opens)"
    )
    imp.add_argument(
        "--extension",
        default=".svs",
        help=f"slide file extension when not found ({', '.join(SLIDE_SUFFIXES)})",
    )
    kind = imp.add_mutually_exclusive_group()
    kind.add_argument("--ordinal", dest="ordinal", action="store_true", default=None, help="grades")
    kind.add_argument("--nominal", dest="ordinal", action="store_false", help="unordered classes")
    imp.add_argument("--force", action="store_true", help="replace existing output files")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        task = read_task(args.task, fold=args.fold, ordinal=args.ordinal)
        done = write_declaration(
            task, args.out, name=args.name, wsi_root=args.wsi_root, extension=args.extension, force=args.force
        )
    except PathoBenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    kind = "grade (quadratic_kappa)" if task.ordinal else "label (balanced_accuracy)"
    print(
        f"{done.declaration}: benchmark {done.name!r}, answer {kind}, {done.n_items} item(s) in {done.items}"
    )
    if task.skipped:
        print(f"note: {task.skipped} test row(s) without a label skipped")
    if done.slides_found is not None:
        print(f"{done.slides_found} of {done.n_items} slide(s) found under {args.wsi_root}")
        for slide_id in done.missing[:10]:
            print(f"warning: slide {slide_id!r} not found under {args.wsi_root}", file=sys.stderr)
    print(f"next: giant-experiments --file {done.declaration} check")
    return 0


if __name__ == "__main__":
    sys.exit(main())
