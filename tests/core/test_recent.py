"""RecentValues: the newest values kept, a hit counts as a use, a stored None told from a miss."""

from __future__ import annotations

import threading

from giant_assets.core.recent import RecentValues


def test_the_newest_are_kept_and_a_hit_is_a_use() -> None:
    kept: RecentValues[int] = RecentValues(2)
    kept.put("a", 1)
    kept.put("b", 2)
    assert kept.get("a") == 1  # now the most recent
    kept.put("c", 3)  # lets "b" go
    assert (kept.get("a"), kept.get("b"), kept.get("c")) == (1, None, 3)
    kept.clear()
    assert kept.get("a", "missing") == "missing"


def test_a_stored_none_is_told_from_a_miss() -> None:
    kept: RecentValues[None] = RecentValues(4)
    missing = object()
    kept.put("nothing found", None)
    assert kept.get("nothing found", missing) is None and kept.get("never asked", missing) is missing


def test_threads_putting_at_once_keep_the_bound() -> None:
    kept: RecentValues[int] = RecentValues(50)

    def put_many(base: int) -> None:
        for n in range(2_000):
            kept.put((base, n), n)
            kept.get((base, n - 1))

    threads = [threading.Thread(target=put_many, args=(b,)) for b in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(kept._kept) == 50  # noqa: SLF001
    assert all(kept.get(key) == key[1] for key in list(kept._kept))  # noqa: SLF001 (each its own value)
