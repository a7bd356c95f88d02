"""``giant-qupath``: agent regions out to QuPath, a pathologist's annotations back as reference regions.

giant-qupath export --experiment demo-giant --benchmark tcga    # data/qupath/demo-giant/tcga/*.geojson
giant-qupath export --experiment demo-giant     # every benchmark it ran: data/qupath/demo-giant/<benchmark>/
giant-qupath export --experiment demo-path-review --benchmark tcga   # + the regions it reported
giant-qupath import annotations/ --out data/qupath/reference_regions.json
GIANT_REGIONS_PATH=data/qupath/reference_regions.json  # then roi_evaluation scores against them
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from giant_assets.benchmarks.registry import benchmark_arg
from giant_assets.core.helptext import plain
from giant_assets.core.settings import data_dir
from giant_assets.core.storage import ParquetStore
from giant_assets.eval.qupath import (
    DEFAULT_POINT_SIZE,
    EXPORT_SUFFIXES,
    export_qupath,
    import_qupath,
    read_reported_regions,
    stored_reported_regions,
    write_reference_regions,
)

ITEMS_TABLE = "benchmark_items"


def _table(store: ParquetStore, table: str, partitions: list[str] | None = None) -> pd.DataFrame:
    available = store.partitions(table)
    wanted = partitions if partitions is not None else available
    missing = [p for p in wanted if p not in available]
    if not available or missing:
        shown = ", ".join(missing) if missing else "any partition"
        raise ValueError(f"no {table!r} table ({shown}) under {store.root}: materialize it first")
    return store.read(table, partitions)


PROJECT_FILE = "project.qpproj"
_PROJECT_OWN = ("data", "classifiers", "scripts")  # a QuPath project's own folders: no exports there


def _project_hint(project: Path) -> str:
    return (
        f"{project} is a QuPath project: its objects are stored in data/*/data.qpdata, which only QuPath "
        "reads. In QuPath open each image of the project and use File > Export objects as GeoJSON (or run "
        "exportObjectsToGeoJson(getAnnotationObjects(), path, 'FEATURE_COLLECTION') for every image), then "
        "import those .geojson files (or the project folder, where QuPath saves them by default)"
    )


def _folder_files(folder: Path) -> list[Path]:
    """The exports under a folder, leaving out a QuPath project's own files (data/, classifiers/...)."""
    projects = [p.parent for p in folder.rglob(PROJECT_FILE)]
    files = []
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or not path.name.lower().endswith(EXPORT_SUFFIXES):
            continue
        if any(path.is_relative_to(p / own) for p in projects for own in _PROJECT_OWN):
            continue
        files.append(path)
    if not files and projects:
        raise ValueError(_project_hint(projects[0] / PROJECT_FILE))
    return files


def _files(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += _folder_files(path)
        elif path.name == PROJECT_FILE:
            raise ValueError(_project_hint(path))
        elif path.is_file():
            files.append(path)
        else:
            raise ValueError(f"{path}: no such file or folder")
    if not files:
        raise ValueError(
            f"no QuPath export (.geojson, .json, .geojson.gz or .zip) in {', '.join(map(str, paths))}"
        )
    unique = {path.resolve(): path for path in files}  # a file named twice (itself, and its folder) once
    return list(unique.values())


def _benchmarks(store: ParquetStore, experiment: str, benchmark: str | None) -> list[str]:
    """The benchmark asked for, else every benchmark the experiment has predictions of."""
    if benchmark is not None:
        return [benchmark]
    found = sorted(
        p.split("/", 1)[1] for p in store.partitions("predictions") if p.startswith(f"{experiment}/")
    )
    if not found:
        raise ValueError(
            f"no 'predictions' table of experiment {experiment!r} under {store.root}: materialize it first"
        )
    return found


def run_export(args: argparse.Namespace, root: Path) -> str:
    store = ParquetStore(root)
    benchmarks = _benchmarks(store, args.experiment, args.benchmark)
    given = read_reported_regions(args.reported, args.benchmark) if args.reported else None
    all_items = _table(store, ITEMS_TABLE)
    lines = []
    for benchmark in benchmarks:
        predictions = _table(store, "predictions", [f"{args.experiment}/{benchmark}"])
        items = all_items[all_items["benchmark_name"] == benchmark]
        base = args.out or root / "qupath" / args.experiment
        out = base / benchmark if args.benchmark is None or args.out is None else args.out
        if given is not None:
            reported = [r for r in given if r.get("benchmark_name", benchmark) == benchmark]
        else:
            reported = stored_reported_regions(store, args.experiment, benchmark)
        written = export_qupath(predictions, items, out, reported=reported)
        regions = f" and {len(reported)} reported region(s)" if reported else ""
        lines.append(
            f"{benchmark}: wrote {len(written)} QuPath GeoJSON file(s), one per slide with a crop"
            f"{regions}, to {out}"
        )
    return "\n".join(lines)


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


def build_parser() -> argparse.ArgumentParser:
    """The command line: ``export`` and ``import``, every flag with its help."""
    parser = argparse.ArgumentParser(prog="giant-qupath", description=plain(__doc__.split("\n\n")[0]))
    parser.add_argument("--data-dir", type=Path, help="the data folder (default $GIANT_DATA_DIR or ./data)")
    sub = parser.add_subparsers(dest="command", required=True)
    exp = sub.add_parser("export", help="every crop the agent viewed, one GeoJSON file per slide")
    exp.add_argument("--experiment", required=True, help="the experiment whose runs are exported")
    exp.add_argument(
        "--benchmark",
        type=benchmark_arg,
        help="only this benchmark (default: every benchmark the experiment has predictions of)",
    )
    exp.add_argument(
        "--out",
        type=Path,
        help="folder (default <data>/qupath/<experiment>/<benchmark>; without --benchmark, one "
        "<benchmark> folder under it per benchmark)",
    )
    exp.add_argument(
        "--reported",
        type=Path,
        help="instead of the stored path_review_regions of a path-review experiment (read by default): "
        "reported regions as a JSON list of {benchmark_id, run_index, box, ...} (and benchmark_name "
        "without --benchmark)",
    )
    imp = sub.add_parser("import", help="QuPath GeoJSON exports -> a reference regions file")
    imp.add_argument(
        "paths",
        nargs="+",
        type=Path,
        help="QuPath exports (.geojson, .json, .geojson.gz, .zip) or folders of them",
    )
    imp.add_argument("--out", type=Path, help="regions file (default <data>/qupath/reference_regions.json)")
    imp.add_argument(
        "--benchmark",
        action="append",
        type=benchmark_arg,
        help="only the items of this benchmark (repeat; default all)",
    )
    imp.add_argument("--slide", help="the slide of every file (default: matched by file or folder name)")
    imp.add_argument(
        "--class",
        dest="class_",
        action="append",
        help="keep only this classification (repeat); naming 'GIANT crop' or 'GIANT reported region' "
        "imports the objects export wrote, otherwise left out",
    )
    imp.add_argument(
        "--point-size",
        type=float,
        default=DEFAULT_POINT_SIZE,
        help="side of the box a point annotation becomes, level-0 pixels "
        f"(at least 1; default {DEFAULT_POINT_SIZE})",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    root = args.data_dir.expanduser().resolve() if args.data_dir else data_dir()
    try:
        print(run_export(args, root) if args.command == "export" else run_import(args, root))
    except (ValueError, OSError) as exc:
        print(f"giant-qupath: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
