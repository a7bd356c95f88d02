"""Benchmarks as declarations: the five built-in MultiPathQA ones and those an experiments file declares."""
