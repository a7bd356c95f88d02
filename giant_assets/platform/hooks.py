"""Hooks: a table whose rebuild failed is never served as if it were current."""

from __future__ import annotations

from dagster import HookContext, HookDefinition, failure_hook


def _user_error(error: BaseException | None) -> BaseException | None:
    """The first exception in the cause chain not raised by Dagster itself (the step's own error)."""
    while error is not None and type(error).__module__.startswith("dagster") and error.__cause__:
        error = error.__cause__
    return error


def retire_on_failure(*tables: str) -> HookDefinition:
    """A failure hook retiring ``tables`` (core/storage.py ``ParquetStore.retire``) when the step fails.

    Attached to the unpartitioned tables built across experiments: after a failed rebuild their views
    fail every query saying why, instead of serving the previous build.
    """

    @failure_hook(name=f"retire_{'_'.join(tables)}_on_failure", required_resource_keys={"storage"})
    def _retire(context: HookContext) -> None:
        error = _user_error(context.op_exception)
        reason = f"its rebuild failed: {type(error).__name__}: {error}" if error else "its rebuild failed"
        store = context.resources.storage.store(log=context.log.warning)
        for table in tables:
            moved = store.retire(table, reason)
            context.log.warning(
                f"{table}: rebuild failed, view now refuses queries until it is materialized again"
                + (f"; previous files kept in {moved}" if moved else "")
            )

    return _retire
