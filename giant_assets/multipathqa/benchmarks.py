"""The five MultiPathQA benchmarks, the platform's built-in declarations: names, metrics and class counts,
defined once. Other code reaches them through ``giant_assets.benchmarks.registry``, beside the benchmarks
an experiments file declares (``BenchmarkSpec`` describes both)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BenchmarkSpec:
    """What scoring needs of a benchmark: built in (with the dataset card's counts) or declared."""

    name: str
    metric_type: str  # accuracy | balanced_accuracy | f1_macro | quadratic_kappa
    answer_kind: str  # "index" (1-based option index) | "label" (option text) | "grade" (an integer grade)
    questions: int | None = None  # known for the built-ins only
    n_classes: int | None = None


BENCHMARKS: dict[str, BenchmarkSpec] = {
    spec.name: spec
    for spec in (
        BenchmarkSpec("tcga", "balanced_accuracy", "index", 221, 30),
        BenchmarkSpec("gtex", "balanced_accuracy", "label", 191, 20),
        BenchmarkSpec("panda", "balanced_accuracy", "grade", 197, 6),
        BenchmarkSpec("tcga_slidebench", "accuracy", "index", 197, 4),
        BenchmarkSpec("tcga_expert_vqa", "accuracy", "index", 128, 4),
    )
}
BENCHMARK_NAMES: tuple[str, ...] = tuple(BENCHMARKS)
PANDA_GRADES: tuple[int, ...] = (0, 1, 2, 3, 4, 5)
