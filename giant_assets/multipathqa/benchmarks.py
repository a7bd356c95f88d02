"""The five MultiPathQA benchmarks: names, metrics and class counts, defined once."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BenchmarkSpec:
    """Static facts about one MultiPathQA benchmark (from the dataset card and the paper)."""

    name: str
    metric_type: str  # "accuracy" | "balanced_accuracy"
    answer_kind: str  # "index" (1-based option index) | "label" (option text) | "grade" (ISUP 0..5)
    questions: int
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
