"""giant-grade on hostile files gives messages, never tracebacks (issue 12, fault 6); reports keep the
user's umask (fault 10); the protein-structure metrics of spec 001 against independent oracles."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.transform import Rotation

from giant_assets.grading.cli import EXIT_INVALID, run
from giant_assets.grading.metrics import get_metric
from giant_assets.grading.structure import gdt_ts, rmsd, tm_score


@pytest.fixture
def task_file(tmp_path: Path) -> Path:
    pd.DataFrame({"benchmark_id": ["a", "b", "c"], "truth_label": [0, 1, 1]}).to_csv(
        tmp_path / "ans.csv", index=False
    )
    (tmp_path / "t.yaml").write_text("id: toy\nanswers: ans.csv\nmetric: accuracy\nlabels: [0, 1]\n")
    return tmp_path / "t.yaml"


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("extra.csv", "benchmark_id,prediction\na,0,surprise\nb,1\nc,1\n", "row 2 (line 2) has 3 field(s)"),
        (
            "deep.jsonl",
            '{"benchmark_id": "a", "prediction": ' + "[" * 100_000 + "]" * 100_000 + "}\n",
            "nested",
        ),
        ("latin1.csv", "benchmark_id,prediction\na,0\nb,1\nc,caf\xe9\n", "byte 0xe9 at offset 37 (line 4)"),
    ],
)
def test_hostile_files_are_messages(tmp_path, task_file, capsys, name, content, message) -> None:
    path = tmp_path / name
    path.write_bytes(content.encode("latin-1"))
    old = os.umask(0o022)
    try:
        code = run(
            [str(path), "--task", "toy", "--task-file", str(task_file), "--out", str(tmp_path / "r.json")]
        )
    finally:
        os.umask(old)
    out = capsys.readouterr()
    assert code == EXIT_INVALID and message in out.out and "Traceback" not in out.out + out.err
    assert (tmp_path / "r.json").stat().st_mode & 0o777 == 0o644


def helix(n: int) -> np.ndarray:
    t = np.arange(n) * 100 * np.pi / 180
    return np.stack([2.3 * np.cos(t), 2.3 * np.sin(t), 1.5 * np.arange(n)], axis=1)


def test_rmsd_equals_scipy_alignment_and_is_rotation_invariant() -> None:
    ref = helix(40)
    rng = np.random.default_rng(3)
    model = Rotation.random(random_state=4).apply(ref + rng.normal(scale=0.7, size=ref.shape)) + [5, -2, 9]
    _, rssd = Rotation.align_vectors(ref - ref.mean(0), model - model.mean(0))
    assert rmsd(model, ref) == pytest.approx(rssd / np.sqrt(len(ref)), rel=1e-9)
    assert rmsd(Rotation.random(random_state=1).apply(ref) + 3, ref) == pytest.approx(0.0, abs=1e-9)


def test_tm_score_and_gdt_ts_hand_cases() -> None:
    ref = helix(50)
    moved = Rotation.random(random_state=2).apply(ref) - 7
    assert tm_score(moved, ref) == pytest.approx(1.0) and gdt_ts(moved, ref) == pytest.approx(1.0)
    # oracle: scipy's optimal rotation (align_vectors) superposes the model; then the formulas by hand
    noisy = moved + np.random.default_rng(8).normal(scale=2.0, size=ref.shape)
    rotation, _ = Rotation.align_vectors(ref - ref.mean(0), noisy - noisy.mean(0))
    d = np.linalg.norm(rotation.apply(noisy - noisy.mean(0)) + ref.mean(0) - ref, axis=1)
    d0 = 1.24 * (50 - 15) ** (1 / 3) - 1.8
    assert tm_score(noisy, ref) == pytest.approx(np.mean(1 / (1 + (d / d0) ** 2)), rel=1e-9)
    assert gdt_ts(noisy, ref) == pytest.approx(np.mean([(d <= c).mean() for c in (1, 2, 4, 8)]))
    assert 0.2 < gdt_ts(noisy, ref) < 0.95
    assert get_metric("tm_score")(ref.ravel(), moved.ravel()) == pytest.approx(1.0)
    assert get_metric("rmsd").is_lower_better
    assert get_metric("auc_roc")(np.array([0, 1, 1, 0]), np.array([0.1, 0.8, 0.7, 0.3])) == 1.0
