"""``giant-check-data``: before spending money, say which slides of a MultiPathQA CSV are missing.

Exit codes: 0 every slide is there and readable; 1 something is missing, unreadable, ambiguous or a row
is malformed; 2 usage errors (bad arguments, no such CSV or WSI root, a CSV that cannot be read).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from giant_assets.multipathqa.inventory import check_csv
from giant_assets.multipathqa.loading import CsvFormatError

EXIT_COMPLETE, EXIT_INCOMPLETE, EXIT_USAGE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="giant-check-data",
        description="Check that every slide of a MultiPathQA CSV is under the WSI root and readable.",
    )
    parser.add_argument("--csv", required=True, type=Path, help="the MultiPathQA CSV")
    parser.add_argument("--wsi-root", required=True, type=Path, help="the folder holding the slides")
    parser.add_argument(
        "--missing-out",
        type=Path,
        help="write the questions without a usable slide here as CSV "
        "(benchmark, benchmark_id, image_path, file_id, status, reason)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)  # argparse exits 2 on usage errors
    wsi_root = args.wsi_root.expanduser()
    if not wsi_root.is_dir():
        print(f"giant-check-data: WSI root {wsi_root} is not a directory", file=sys.stderr)
        return EXIT_USAGE
    try:
        inventory, row_errors = check_csv(args.csv.expanduser(), wsi_root)
    except CsvFormatError as exc:
        print(f"giant-check-data: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(inventory.to_text())
    if args.missing_out:
        try:
            args.missing_out.parent.mkdir(parents=True, exist_ok=True)
            inventory.problems.to_csv(args.missing_out, index=False)
        except OSError as exc:
            print(f"giant-check-data: cannot write --missing-out {args.missing_out}: {exc}", file=sys.stderr)
            return EXIT_USAGE
        print(f"\n{len(inventory.problems)} row(s) written to {args.missing_out}")
    for error in row_errors:
        print(f"malformed row, slide not checked: {error}", file=sys.stderr)
    return EXIT_COMPLETE if inventory.complete and not row_errors else EXIT_INCOMPLETE


if __name__ == "__main__":
    sys.exit(main())
