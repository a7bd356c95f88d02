"""IO manager: DataFrame assets become Parquet files (one per partition) behind DuckDB views."""

from __future__ import annotations

import pandas as pd
from dagster import ConfigurableIOManager, InputContext, OutputContext

from giant_assets.platform.partitions import storage_key
from giant_assets.platform.resources import StorageResource


class ParquetDuckDBIOManager(ConfigurableIOManager):
    """Stores each asset as table ``<asset name>``: ``<data_dir>/<name>/<partition>.parquet``.

    A benchmark x experiment partition is the file ``<data_dir>/<name>/<experiment>/<benchmark>.parquet``.
    """

    storage: StorageResource

    @staticmethod
    def _table(context: OutputContext | InputContext) -> str:
        return "_".join(context.asset_key.path)

    def handle_output(self, context: OutputContext, obj: pd.DataFrame) -> None:
        if obj is None:
            return
        if not isinstance(obj, pd.DataFrame):
            raise TypeError(f"{context.asset_key.to_user_string()} must return a pandas DataFrame")
        partition = storage_key(context.partition_key) if context.has_partition_key else None
        path = self.storage.store(log=context.log.warning).write(self._table(context), obj, partition)
        context.add_output_metadata({"parquet_path": str(path), "duckdb_view": self._table(context)})

    def load_input(self, context: InputContext) -> pd.DataFrame:
        """Load the requested partitions that exist (all partitions for an unpartitioned reader)."""
        table = self._table(context.upstream_output) if context.upstream_output else self._table(context)
        store = self.storage.store()
        if not context.has_asset_partitions:
            return store.read(table)
        wanted = [storage_key(key) for key in context.asset_partition_keys]
        present = [key for key in wanted if store.exists(table, key)]
        missing = sorted(set(wanted) - set(present))
        if not present:
            raise FileNotFoundError(
                f"no materialized partitions of {table!r} among {wanted}: materialize it first"
            )
        if missing:  # normal for a reader of the whole grid: not every experiment has run everywhere
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            context.log.info(f"{table}: {len(missing)} of {len(wanted)} partitions not materialized: {shown}")
        return store.read(table, present)
