"""Fixtures: a synthetic MultiPathQA items table (all five benchmarks) and the tasks built from it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from giant_assets.multipathqa.benchmarks import BENCHMARKS, PANDA_GRADES

N_OPTIONS = {"gtex": 20, "tcga": 30, "tcga_slidebench": 4, "tcga_expert_vqa": 4}


def option_names(benchmark: str) -> list[str]:
    if benchmark == "gtex":
        return [f"Organ {chr(65 + i)}" for i in range(N_OPTIONS["gtex"])]
    return [f"{benchmark} choice {i + 1}" for i in range(N_OPTIONS[benchmark])]


def make_items(n_per: int = 40, seed: int = 0) -> pd.DataFrame:
    """``n_per`` items per benchmark with random truths; ids like ``gtex-007`` (panda: plain numbers)."""
    rng = np.random.default_rng(seed)
    frames = []
    for name, spec in BENCHMARKS.items():
        if spec.answer_kind == "grade":
            truth = rng.choice(PANDA_GRADES, n_per)
            options: list = [None] * n_per
            ids = [str(i) for i in range(n_per)]
        else:
            truth = rng.integers(1, N_OPTIONS[name] + 1, n_per)
            options = [option_names(name)] * n_per
            ids = [f"{name}-{i:03d}" for i in range(n_per)]
        frames.append(
            pd.DataFrame(
                {
                    "benchmark_name": name,
                    "benchmark_id": ids,
                    "truth_label": truth.astype("int64"),
                    "options": options,
                    "n_options": [len(o) if o else 0 for o in options],
                    "metric_type": spec.metric_type,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


@pytest.fixture(scope="session")
def items() -> pd.DataFrame:
    return make_items()


@pytest.fixture(scope="session")
def tasks(items: pd.DataFrame) -> dict:
    from giant_assets.grading.tasks import tasks_from_items

    return tasks_from_items(items)


def write_submission(path, ids, predictions, header=("benchmark_id", "prediction")) -> None:
    pd.DataFrame({header[0]: list(ids), header[1]: list(predictions)}).to_csv(path, index=False)
