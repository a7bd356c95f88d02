"""What a WSI root holds for a MultiPathQA CSV: per benchmark, slides found, missing and unreadable.

One plain function, :func:`take_inventory`, over resolved items (the output of
:func:`giant_assets.multipathqa.wsi.resolve_items`), shared by the ``slide_inventory`` asset and the
``giant-check-data`` CLI.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from giant_assets.multipathqa.loading import parse_items, read_csv_strings
from giant_assets.multipathqa.schema import WSI_AMBIGUOUS, WSI_MISSING, WSI_OK, WSI_UNREADABLE, WSI_UNSAFE
from giant_assets.multipathqa.wsi import resolve_items
from giant_assets.slides.formats import slide_bytes

STATUS_COLUMNS = {
    WSI_OK: "found",
    WSI_MISSING: "missing",
    WSI_UNREADABLE: "unreadable",
    WSI_AMBIGUOUS: "ambiguous",
    WSI_UNSAFE: "unsafe_path",
}
SUMMARY_COLUMNS = (
    "benchmark_name",
    "questions",
    "slides",
    *STATUS_COLUMNS.values(),
    "total_bytes",
    "vendors",
    "levels_min",
    "levels_max",
    "mpp_min",
    "mpp_max",
)
PROBLEM_COLUMNS = ("benchmark_name", "benchmark_id", "image_path", "file_id", "status", "reason")
ALL_BENCHMARKS = "all"


@dataclass(frozen=True)
class Inventory:
    """``summary``: one row per benchmark plus ``all`` (slides shared by benchmarks counted once);
    ``problems``: one row per question whose slide is not usable."""

    summary: pd.DataFrame
    problems: pd.DataFrame

    @property
    def complete(self) -> bool:
        return self.problems.empty

    def to_text(self, max_problems: int = 50) -> str:
        shown = self.summary.assign(total_bytes=self.summary["total_bytes"].map(_human_bytes))
        text = shown.to_markdown(index=False)
        if self.problems.empty:
            return text + "\n\nevery slide is there and readable"
        listing = self.problems.head(max_problems).to_markdown(index=False)
        more = len(self.problems) - max_problems
        tail = f"\n... and {more} more (write them all with --missing-out)" if more > 0 else ""
        return f"{text}\n\n{len(self.problems)} question(s) without a usable slide:\n{listing}{tail}"


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.2f} TB"


def _summarize(name: str, questions: pd.DataFrame) -> dict:
    """One summary row; a slide is one distinct image_path (found slides: one distinct file)."""
    slides = questions.drop_duplicates("slide_key")
    found = slides[slides["wsi_status"] == WSI_OK].drop_duplicates("wsi_path")
    counts = slides["wsi_status"].value_counts()
    mpp = pd.concat([found["mpp_x"], found["mpp_y"]]).dropna()
    levels = found["level_count"].dropna()
    return {
        "benchmark_name": name,
        "questions": len(questions),
        "slides": len(slides),
        **{column: int(counts.get(status, 0)) for status, column in STATUS_COLUMNS.items()},
        "total_bytes": int(sum(slide_bytes(p) for p in found["wsi_path"])),
        "vendors": ", ".join(sorted({str(v) for v in found["vendor"].dropna()})),
        "levels_min": int(levels.min()) if len(levels) else None,
        "levels_max": int(levels.max()) if len(levels) else None,
        "mpp_min": float(mpp.min()) if len(mpp) else None,
        "mpp_max": float(mpp.max()) if len(mpp) else None,
    }


def take_inventory(resolved: pd.DataFrame) -> Inventory:
    """Summarize resolved items per benchmark and list the questions whose slide is not usable."""
    items = resolved.assign(
        slide_key=resolved["wsi_path"].where(resolved["wsi_status"] == WSI_OK, resolved["image_path"])
    )
    rows = [_summarize(name, group) for name, group in items.groupby("benchmark_name", sort=True)]
    if len(items):
        rows.append(_summarize(ALL_BENCHMARKS, items))
    summary = pd.DataFrame.from_records(rows, columns=list(SUMMARY_COLUMNS))
    for column in ("levels_min", "levels_max"):
        summary[column] = summary[column].astype("Int64")
    for column in ("mpp_min", "mpp_max"):
        summary[column] = summary[column].astype("Float64")
    bad = items[items["wsi_status"] != WSI_OK]
    file_ids = bad["file_id"] if "file_id" in bad else pd.Series(None, index=bad.index, dtype=object)
    problems = pd.DataFrame(
        {
            "benchmark_name": bad["benchmark_name"],
            "benchmark_id": bad["benchmark_id"],
            "image_path": bad["image_path"],
            "file_id": file_ids,
            "status": bad["wsi_status"],
            "reason": bad["wsi_error"],
        },
        columns=list(PROBLEM_COLUMNS),
    ).reset_index(drop=True)
    return Inventory(summary, problems)


def check_csv(csv_path: Path, wsi_root: Path) -> tuple[Inventory, list[str]]:
    """Read and validate the CSV as ingest does, resolve its slides, take the inventory.

    Returns the inventory and the row errors of malformed rows (whose slides are not checked).
    """
    items, errors = parse_items(read_csv_strings(csv_path), str(csv_path))
    if items.empty:
        items = pd.DataFrame(columns=["benchmark_name", "benchmark_id", "image_path", "file_id"])
    else:
        items = items[items["is_valid"]].reset_index(drop=True)
    resolved = resolve_items(items, wsi_root)
    return take_inventory(resolved), [str(e) for e in errors]
