"""Grading a ~50 MB submission (CSV and JSONL, 1.3M items): streamed vs read whole. Target: >= 10x less
extra memory (peak RSS above the RSS with the task loaded; the peak is reset through
/proc/self/clear_refs), measured in fresh processes; also prints the times.

The whole-file baseline is what grading did before streaming: every row read into one pandas frame of
text cells (CSV via read_csv, JSONL via a list of dicts), stripped, checked with isin/duplicated, then
aligned to the answers with set_index/reindex.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

N_ITEMS = 1_300_000

CHILD = r"""
import gc, json, sys, time
import numpy as np, pandas as pd
from giant_assets.grading.task_files import load_task_file

def status_kb(field):
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(field + ":"))

mode, path = sys.argv[1], sys.argv[2]
task = load_task_file(sys.argv[3])
gc.collect()
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # reset the peak RSS (VmHWM) to the current RSS
base = status_kb("VmRSS")
start = time.perf_counter()
if mode == "streamed":
    from giant_assets.grading.grade import grade_csv
    score = grade_csv(path, task).score
else:
    if path.endswith(".csv"):
        rows = pd.read_csv(path, dtype=str, keep_default_na=False)
    else:
        with open(path, encoding="utf-8") as fh:
            rows = pd.DataFrame.from_records([json.loads(line) for line in fh if line.strip()]).astype(str)
    ids = rows["drug"].str.strip()
    known = ids.isin(task.answers["drug"].astype(str))
    assert known.all() and not ids.duplicated().any()
    pred = pd.to_numeric(rows["prediction"].str.strip(), errors="coerce")
    aligned = pd.Series(pred.to_numpy(), index=ids).reindex(task.answers["drug"].astype(str))
    score = round(float(np.sqrt(np.mean((aligned.to_numpy() - task.answers["y"].to_numpy()) ** 2))), 5)
elapsed = time.perf_counter() - start
peak = status_kb("VmHWM")
print(json.dumps({"score": score, "extra_mb": (peak - base) / 1024, "seconds": elapsed}))
"""


def write_inputs(folder: Path) -> tuple[Path, Path, Path]:
    rng = np.random.default_rng(0)
    ids = [f"item-{i:012d}-slide" for i in range(N_ITEMS)]
    truth = rng.normal(size=N_ITEMS)
    pd.DataFrame({"drug": ids, "y": truth}).to_csv(folder / "answers.csv", index=False)
    (folder / "task.yaml").write_text(
        "id: big\nanswers: answers.csv\nid_column: drug\ntarget_column: y\nmetric: rmse\n"
    )
    preds = truth + rng.normal(scale=0.1, size=N_ITEMS)
    pd.DataFrame({"drug": ids, "prediction": preds}).to_csv(folder / "sub.csv", index=False)
    with open(folder / "sub.jsonl", "w", encoding="utf-8") as fh:
        for i, p in zip(ids, preds, strict=True):
            fh.write(json.dumps({"drug": i, "prediction": float(p)}) + "\n")
    return folder / "task.yaml", folder / "sub.csv", folder / "sub.jsonl"


def measure(mode: str, submission: Path, task: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(submission), str(task)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        task, csv_path, jsonl_path = write_inputs(Path(tmp))
        for path in (csv_path, jsonl_path):
            whole, streamed = measure("whole", path, task), measure("streamed", path, task)
            assert abs(whole["score"] - streamed["score"]) < 1e-9, (whole, streamed)
            ratio = whole["extra_mb"] / max(streamed["extra_mb"], 1.0)
            print(
                f"{path.suffix[1:]:5s} {path.stat().st_size / 1e6:.0f} MB, {N_ITEMS:,} rows: extra peak RSS "
                f"whole {whole['extra_mb']:.0f} MB ({whole['seconds']:.1f} s) vs streamed "
                f"{streamed['extra_mb']:.0f} MB ({streamed['seconds']:.1f} s): {ratio:.0f}x less memory "
                f"(target >= 10x, streamed counted as at least 1 MB)"
            )


if __name__ == "__main__":
    main()
