"""Export voted item predictions as a grading submission (``benchmark_id,prediction``).

Every item of the benchmark gets a row, so the file is a complete submission. An item without a
label (slide unavailable, no extractable answer, failed runs) gets an empty prediction: an abstention,
which the grader scores as wrong, exactly as ``benchmark_metrics.value_all_items_pct`` does.
Files live at ``submission_path(data_root, experiment, benchmark)``: names built from data are confined
to the data folder (core/paths.py); written atomically with the user's umask.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from giant_assets.core.files import atomic_write_bytes
from giant_assets.core.paths import confined_path

EXPORTS_DIR = "exports"
SUBMISSION_COLUMNS = ["benchmark_id", "prediction"]


def submission_frame(item_predictions: pd.DataFrame) -> pd.DataFrame:
    """``benchmark_id``, ``prediction`` (the voted label as text, "" where there is none)."""
    labels = item_predictions["predicted_label"].astype("Int64")
    return pd.DataFrame(
        {
            "benchmark_id": item_predictions["benchmark_id"].astype(str).to_numpy(),
            "prediction": labels.astype(str).where(labels.notna(), "").to_numpy(),
        },
        columns=SUBMISSION_COLUMNS,
    )


def submission_path(data_root: Path, experiment: str, benchmark: str) -> Path:
    """``<data_root>/exports/<experiment>/<benchmark>.csv``, each name encoded so it stays inside."""
    return confined_path(data_root, EXPORTS_DIR, experiment, f"{benchmark}.csv")


def write_submission(item_predictions: pd.DataFrame, path: Path) -> Path:
    """Write the submission CSV atomically (temp file + rename), mode 0o666 minus the umask."""
    text = submission_frame(item_predictions).to_csv(index=False)
    atomic_write_bytes(path, text.encode("utf-8"))
    return path
