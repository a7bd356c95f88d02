"""Runless asset events stored by several threads of one process at once, then read back."""

from __future__ import annotations

import threading

from dagster import AssetKey, AssetMaterialization, DagsterInstance


def report_from_threads(instance: DagsterInstance, threads: int = 6, events: int = 10) -> None:
    """Each of ``threads`` threads stores ``events`` materializations of its own asset ``t<i>`` at once;
    asserts none failed and each asset's latest is its last."""
    errors: list[BaseException] = []

    def report(i: int) -> None:
        try:
            for n in range(events):
                instance.report_runless_asset_event(AssetMaterialization(f"t{i}", metadata={"n": n}))
        except BaseException as exc:  # pragma: no cover - shown by the assert
            errors.append(exc)

    started = [threading.Thread(target=report, args=(i,)) for i in range(threads)]
    for t in started:
        t.start()
    for t in started:
        t.join()
    assert not errors, errors
    for i in range(threads):
        latest = instance.get_latest_materialization_event(AssetKey(f"t{i}")).asset_materialization
        assert latest.metadata["n"].value == events - 1
