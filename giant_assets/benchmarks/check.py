"""``giant-experiments check`` for a declared benchmark: its items file readable, the declared columns
present, every answer valid for the answer kind, ids unique and the slides found under the WSI root;
counts, and the first problems named with file, row and column."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from giant_assets.benchmarks.declaration import Declaration
from giant_assets.benchmarks.items import parse_declared_items, read_item_file
from giant_assets.multipathqa.loading import CsvFormatError
from giant_assets.multipathqa.schema import WSI_OK
from giant_assets.multipathqa.wsi import resolve_items

SHOWN = 10  # problems listed per benchmark


@dataclass
class CheckReport:
    """What ``check`` found for one declared benchmark."""

    name: str
    rows: int = 0
    valid: int = 0
    slides_found: int | None = None  # None: not checked (no WSI root)
    problems: list[str] = field(default_factory=list)  # fatal: the benchmark cannot be evaluated as is
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        slides = "slides not checked" if self.slides_found is None else f"{self.slides_found} slide(s) found"
        return f"benchmark {self.name!r}: {self.rows} row(s), {self.valid} valid item(s), {slides}"


def check_declaration(declaration: Declaration, default_root: Path | None) -> CheckReport:
    """Check one declaration (``default_root``: the WSI root when it declares none; None: unknown)."""
    report = CheckReport(declaration.name)
    try:
        raw = read_item_file(declaration)
    except CsvFormatError as exc:
        report.problems.append(str(exc))
        return report
    items, errors = parse_declared_items(declaration, raw)
    report.rows, report.valid = len(raw), len(items)
    report.problems += [str(e) for e in errors[:SHOWN]]
    if len(errors) > SHOWN:
        report.problems.append(f"... and {len(errors) - SHOWN} more problem(s) in {declaration.items}")
    root = declaration.wsi_root or default_root
    if root is None:
        report.notes.append("slides not checked: no wsi_root declared and GIANT_WSI_ROOT is not set")
        return report
    if not root.is_dir():
        report.problems.append(f"field 'wsi_root': {root} is not a directory")
        return report
    resolved = resolve_items(items, root)
    report.slides_found = int((resolved["wsi_status"] == WSI_OK).sum())
    slide_column = declaration.columns["slide"]
    missing = resolved[resolved["wsi_status"] != WSI_OK]
    for row in missing.head(SHOWN).itertuples():
        report.problems.append(
            f"{declaration.items}: row {row.row_number} ({declaration.columns['id']}={row.benchmark_id!r}), "
            f"column '{slide_column}': {row.wsi_error}"
        )
    if len(missing) > SHOWN:
        report.problems.append(f"... and {len(missing) - SHOWN} more slide(s) not found under {root}")
    return report
