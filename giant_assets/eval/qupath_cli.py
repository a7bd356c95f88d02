"""``giant-qupath``: agent regions out to QuPath, a pathologist's annotations back as reference regions.

giant-qupath export --experiment demo-giant --benchmark tcga    # data/qupath/demo-giant/tcga/*.geojson
giant-qupath export --experiment demo-path-review --benchmark tcga   # + the regions it reported
giant-qupath import annotations/ --out data/qupath/reference_regions.json
GIANT_REGIONS_PATH=data/qupath/reference_regions.json  # then roi_evaluation scores against them
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from giant_assets.core.helptext import plain
from giant_assets.core.settings import data_dir
from giant_assets.core.storage import ParquetStore
from giant_assets.eval.qupath import (
    DEFAULT_POINT_SIZE,
    GEOJSON_SUFFIXES,
    export_qupath,
    import_qupath,
    read_reported_regions,
    stored_reported_regions,
    write_reference_regions,
)
from giant_assets.multipathqa.benchmarks import BENCHMARK_NAMES

ITEMS_TABLE = "benchmark_items"


def _table(store: ParquetStore, table: str, partitions: list[str] | None = None) -> pd.DataFrame:
    available = store.partitions(table)
    wanted = partitions if partitions is not None else available
    missing = [p for p in wanted if p not in available]
    if not available or missing:
        shown = ", ".join(missing) if missing else "any partition"
        raise ValueError(f"no {table!r} table ({shown}) under {store.root}: materialize it first")
    return store.read(table, partitions)


def _files(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(
                p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in GEOJSON_SUFFIXES
            )
        elif path.is_file():
            files.append(path)
        else:
            raise ValueError(f"{path}: no such file or folder")
    if not files:
        raise ValueError(f"no .geojson or .json file in {', '.join(map(str, paths))}")
    unique = {path.resolve(): path for path in files}  # a file named twice (itself, and its folder) once
    return list(unique.values())


def run_export(args: argparse.Namespace, root: Path) -> str:
    store = ParquetStore(root)
    predictions = _table(store, "predictions", [f"{args.experiment}/{args.benchmark}"])
    items = _table(store, ITEMS_TABLE)
    items = items[items["benchmark_name"] == args.benchmark]
    out = args.out or root / "qupath" / args.experiment / args.benchmark
    if args.reported:
        reported = read_reported_regions(args.reported, args.benchmark)
    else:
        reported = stored_reported_regions(store, args.experiment, args.benchmark)
    written = export_qupath(predictions, items, out, reported=reported)
    regions = f" and {len(reported)} reported region(s)" if reported else ""
    return f"wrote {len(written)} QuPath GeoJSON file(s), one per slide, with every crop{regions}, to {out}"


def run_import(args: argparse.Namespace, root: Path) -> str:
    items = _table(ParquetStore(root), ITEMS_TABLE)
    if args.benchmark:
        items = items[items["benchmark_name"].isin(args.benchmark)]
    files = _files(args.paths)
    frame, summary = import_qupath(
        files, items, point_size=args.point_size, classes=args.class_ or (), slide=args.slide
    )
    if frame.empty:
        raise ValueError(f"no annotation imported from {len(files)} file(s) (skipped: {summary.skipped})")
    out = args.out or root / "qupath" / "reference_regions.json"
    write_reference_regions(frame, out)
    skipped = f"; skipped {summary.skipped}" if summary.skipped else ""
    return (
        f"{summary.regions} annotation(s) from {summary.files} file(s) -> {summary.rows} reference "
        f"region row(s) in {out}{skipped}\nscore against them: GIANT_REGIONS_PATH={out}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="giant-qupath", description=plain(__doc__.split("\n\n")[0]))
    parser.add_argument("--data-dir", type=Path, help="the data folder (default $GIANT_DATA_DIR or ./data)")
    sub = parser.add_subparsers(dest="command", required=True)
    exp = sub.add_parser("export", help="every crop the agent viewed, one GeoJSON file per slide")
    exp.add_argument("--experiment", required=True)
    exp.add_argument("--benchmark", required=True, choices=BENCHMARK_NAMES)
    exp.add_argument("--out", type=Path, help="folder (default <data>/qupath/<experiment>/<benchmark>)")
    exp.add_argument(
        "--reported",
        type=Path,
        help="instead of the stored path_review_regions of a path-review experiment (read by default): "
        "reported regions as a JSON list of {benchmark_id, run_index, box, ...}",
    )
    imp = sub.add_parser("import", help="QuPath GeoJSON exports -> a reference regions file")
    imp.add_argument("paths", nargs="+", type=Path, help="GeoJSON files or folders of them")
    imp.add_argument("--out", type=Path, help="regions file (default <data>/qupath/reference_regions.json)")
    imp.add_argument("--benchmark", action="append", choices=BENCHMARK_NAMES, help="only these (repeat)")
    imp.add_argument("--slide", help="the slide of every file (default: matched by file or folder name)")
    imp.add_argument("--class", dest="class_", action="append", help="keep only this classification (repeat)")
    imp.add_argument(
        "--point-size",
        type=float,
        default=DEFAULT_POINT_SIZE,
        help=f"side of the box a point annotation becomes, level-0 pixels (default {DEFAULT_POINT_SIZE})",
    )
    args = parser.parse_args(argv)
    root = args.data_dir.expanduser().resolve() if args.data_dir else data_dir()
    try:
        print(run_export(args, root) if args.command == "export" else run_import(args, root))
    except (ValueError, OSError) as exc:
        print(f"giant-qupath: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
