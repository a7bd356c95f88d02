"""The Dagster layer: definitions, resources, instance and storages over the plain-Python packages."""

from giant_assets.platform.migration_scripts import parse_once

parse_once()  # Dagster's migration scripts parsed once per process (migration_scripts.py)
