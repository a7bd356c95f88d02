"""Columns of the MultiPathQA CSV and of the resolved ``benchmark_items`` table."""

from __future__ import annotations

REQUIRED_COLUMNS: tuple[str, ...] = (
    "benchmark_name",
    "benchmark_id",
    "image_path",
    "answer",
    "options",
    "metric_type",
    "prompt",
)
OPTIONAL_COLUMNS: tuple[str, ...] = ("file_id", "image_exists", "patch_exists", "is_valid")
METRIC_TYPES: frozenset[str] = frozenset({"accuracy", "balanced_accuracy"})

# Resolution status of an item's slide, as stored in benchmark_items.wsi_status.
WSI_OK = "ok"
WSI_MISSING = "missing"
WSI_UNREADABLE = "unreadable"
WSI_UNSAFE = "unsafe_path"
WSI_AMBIGUOUS = "ambiguous"  # two different files match one row

ITEM_COLUMNS: tuple[str, ...] = (
    "benchmark_name",
    "benchmark_id",
    "row_number",
    "image_path",
    "file_id",
    "prompt_template",
    "prompt",
    "options",
    "n_options",
    "answer",
    "truth_label",
    "metric_type",
    "is_valid",
    "erratum",  # "" or what was done with a known erratum of the released CSV (multipathqa/errata.py)
    "errata_mode",  # apply | flag | exclude: how the table handled the errata
    "wsi_path",
    "wsi_status",
    "wsi_error",
    "width",
    "height",
    "level_count",
    "level_downsamples",
    "mpp_x",
    "mpp_y",
    "vendor",
    "question_fingerprint",  # multipathqa/fingerprint.py: benchmark, rendered prompt, options
    "slide_digest",  # the slide file's name, size, first and last MiB (None: no resolved slide)
    "item_fingerprint",  # the question about the slide: what a stored answer is keyed by
)
