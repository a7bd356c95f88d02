"""Partition sets, defined once: the benchmarks (the five built-in MultiPathQA ones and those declared in
the experiments file) x the declared experiments.

Both dimensions are dynamic: ``giant-experiments sync``, the experiments sensor and ``benchmark_items``
add the five built-ins and every declared benchmark (:func:`ensure_benchmarks`), so a lab's own
benchmark is a new column of the grid without a code change. The UI's partition grid of any
per-result asset is then the results matrix. Multi-partition keys read
``<benchmark>|<experiment>`` (Dagster orders dimensions by name); storage keys read
``<experiment>/<benchmark>`` (one Parquet file per experiment and benchmark).
"""

from __future__ import annotations

from dagster import (
    AssetExecutionContext,
    DynamicPartitionsDefinition,
    MultiPartitionKey,
    MultiPartitionsDefinition,
)

BENCHMARK = "benchmark"
EXPERIMENT = "experiment"

benchmark_partitions = DynamicPartitionsDefinition(name=BENCHMARK)
experiment_partitions = DynamicPartitionsDefinition(name=EXPERIMENT)
results_partitions = MultiPartitionsDefinition(
    {BENCHMARK: benchmark_partitions, EXPERIMENT: experiment_partitions}
)


def result_key(experiment: str, benchmark: str) -> MultiPartitionKey:
    """The Dagster partition key of one (experiment, benchmark) cell."""
    return MultiPartitionKey({BENCHMARK: benchmark, EXPERIMENT: experiment})


def cell(context: AssetExecutionContext) -> tuple[str, str]:
    """(experiment, benchmark) of the partition being materialized."""
    keys = context.partition_key.keys_by_dimension
    return keys[EXPERIMENT], keys[BENCHMARK]


def storage_key(partition_key: str) -> str:
    """Where a partition lives in the store: ``<experiment>/<benchmark>`` for a results cell."""
    if isinstance(partition_key, MultiPartitionKey) or "|" in partition_key:
        experiment, benchmark = split_key(partition_key)
        return f"{experiment}/{benchmark}"
    return partition_key


def split_key(partition_key: str) -> tuple[str, str]:
    """(experiment, benchmark) of a results-grid partition key (``<benchmark>|<experiment>``)."""
    keys = (
        partition_key.keys_by_dimension
        if isinstance(partition_key, MultiPartitionKey)
        else dict(zip((BENCHMARK, EXPERIMENT), partition_key.split("|", 1), strict=True))
    )
    return keys[EXPERIMENT], keys[BENCHMARK]
