"""Export voted item predictions as a grading submission (``benchmark_id,prediction``).

Every item of the benchmark gets a row, so the file is a complete submission. An item without a
label (slide unavailable, no extractable answer, failed runs) gets an empty prediction: an abstention,
which the grader scores as wrong, exactly as ``benchmark_metrics.value_all_items_pct`` does.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

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


def write_submission(item_predictions: pd.DataFrame, path: Path) -> Path:
    """Write the submission CSV atomically (temp file + rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    submission_frame(item_predictions).to_csv(tmp, index=False)
    tmp.replace(path)
    return path
