"""``giant-fetch-slides``: download a MultiPathQA CSV's TCGA slides from GDC into the gdc-client layout.

Rows of tcga, tcga_slidebench and tcga_expert_vqa carry the GDC file UUID in ``file_id``; each distinct
one whose slide is not already found under the WSI root (in any layout) is fetched to
``<wsi-root>/<file_id>/<file_name>``. Rerunning resumes partial files and skips finished ones.
Exit codes: 0 all fetched or present, 1 some failed, 2 usage errors.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tqdm import tqdm

from giant_assets.multipathqa.gdc import DEFAULT_GDC_API, FetchPolicy, FetchResult, GdcFetcher
from giant_assets.multipathqa.loading import CsvFormatError, read_csv_strings
from giant_assets.multipathqa.schema import WSI_OK
from giant_assets.multipathqa.wsi import TCGA_BENCHMARKS, SlideTree, is_gdc_uuid, resolve_slide

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def tcga_file_ids(csv_path: Path, wsi_root: Path) -> tuple[list[str], int]:
    """Distinct GDC file UUIDs of the CSV's TCGA rows whose slide is not under the root yet, and the
    number already found (resolution only, no slide is opened)."""
    raw = read_csv_strings(csv_path)
    if "file_id" not in raw.columns:
        raise CsvFormatError(f"{csv_path}: no file_id column; GDC downloads need the file UUIDs")
    tree = SlideTree.scan(wsi_root)
    wanted: dict[str, None] = {}
    found: set[str] = set()
    for row in raw.to_dict("records"):
        name, file_id = row["benchmark_name"].strip(), row["file_id"].strip()
        if name not in TCGA_BENCHMARKS or not is_gdc_uuid(file_id):
            continue
        res = resolve_slide(wsi_root, name, row["image_path"].strip(), file_id, tree)
        if res.status == WSI_OK:
            found.add(file_id)
        else:
            wanted[file_id] = None
    return [f for f in wanted if f not in found], len(found)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="giant-fetch-slides",
        description="Download the TCGA slides of a MultiPathQA CSV from the GDC data API (resumable).",
    )
    parser.add_argument("--csv", required=True, type=Path, help="the MultiPathQA CSV (its file_id column)")
    parser.add_argument("--wsi-root", required=True, type=Path, help="slides go to <root>/<file_id>/<name>")
    parser.add_argument("--base-url", default=DEFAULT_GDC_API, help=f"GDC API (default {DEFAULT_GDC_API})")
    parser.add_argument("--concurrency", type=int, default=4, help="files downloaded at once (default 4)")
    parser.add_argument(
        "--attempts",
        type=int,
        default=5,
        help="failed tries per file before giving up; a resume that brought bytes is free (default 5)",
    )
    parser.add_argument("--backoff", type=float, default=2.0, help="first retry delay, seconds (default 2)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def _summary(results: list[FetchResult], already: int, seconds: float) -> str:
    by = {s: [r for r in results if r.status == s] for s in ("downloaded", "present", "failed")}
    fetched = sum(r.bytes_fetched for r in results)
    lines = [
        f"downloaded {len(by['downloaded'])}, already complete {len(by['present'])}, "
        f"already under the root {already}, failed {len(by['failed'])}; "
        f"{fetched / 1e6:.1f} MB in {seconds:.1f}s"
    ]
    lines += [f"FAILED {r.file_id}: {r.error}" for r in by["failed"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.concurrency < 1 or args.attempts < 1 or args.backoff < 0:
        print(
            "giant-fetch-slides: --concurrency and --attempts must be >= 1, --backoff >= 0", file=sys.stderr
        )
        return EXIT_USAGE
    wsi_root = args.wsi_root.expanduser()
    if not wsi_root.is_dir():
        print(f"giant-fetch-slides: WSI root {wsi_root} is not a directory", file=sys.stderr)
        return EXIT_USAGE
    try:
        file_ids, already = tcga_file_ids(args.csv.expanduser(), wsi_root)
    except CsvFormatError as exc:
        print(f"giant-fetch-slides: {exc}", file=sys.stderr)
        return EXIT_USAGE
    policy = FetchPolicy(concurrency=args.concurrency, attempts=args.attempts, backoff_s=args.backoff)
    started = time.monotonic()
    bar = tqdm(
        total=0, unit="B", unit_scale=True, unit_divisor=1024, disable=args.no_progress, file=sys.stderr
    )

    def grow(n: int) -> None:
        bar.total += n
        bar.refresh()

    fetcher = GdcFetcher(wsi_root, args.base_url, policy, on_bytes=bar.update, on_total=grow, log=tqdm.write)
    print(f"{len(file_ids)} TCGA slide(s) to fetch from {args.base_url} into {wsi_root}", flush=True)
    with bar:
        results = fetcher.run(file_ids)
    if fetcher.unreachable is not None:
        print(
            f"giant-fetch-slides: {fetcher.unreachable}: nothing fetched ({len(file_ids)} slide(s) left); "
            "check the network connection (or --base-url) and run again",
            file=sys.stderr,
        )
        return EXIT_FAILED
    print(_summary(results, already, time.monotonic() - started))
    return EXIT_FAILED if any(r.status == "failed" for r in results) else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
