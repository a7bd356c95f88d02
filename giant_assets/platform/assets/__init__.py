"""Dagster assets: a thin layer over the plain-Python modules."""
