"""Partition sets, defined once: the five MultiPathQA benchmarks."""

from dagster import StaticPartitionsDefinition

from giant_assets.multipathqa.benchmarks import BENCHMARK_NAMES

benchmark_partitions = StaticPartitionsDefinition(list(BENCHMARK_NAMES))
