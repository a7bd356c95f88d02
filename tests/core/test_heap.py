"""core/heap.py: no automatic collection inside ``loading()``; what exists at its end is frozen."""

from __future__ import annotations

import gc

import pytest

from giant_assets.core import heap


class Node:
    """An object the collector tracks."""


@pytest.fixture(autouse=True)
def collector_on_after():
    yield
    gc.enable()


def test_loading_pauses_collection_and_freezes_what_it_made() -> None:
    assert gc.isenabled()
    before = gc.get_freeze_count()
    with heap.loading():
        assert not gc.isenabled()
        made = [Node() for _ in range(1000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() >= before + len(made)
    assert not any(obj is made[0] for obj in gc.get_objects())  # in no generation: never scanned again
    later = Node()
    assert any(obj is later for obj in gc.get_objects(generation=0))  # collected as usual


def test_an_error_inside_still_restores_collection() -> None:
    with pytest.raises(ImportError), heap.loading():
        raise ImportError("a code location that cannot load")
    assert gc.isenabled()


def test_a_collector_paused_before_stays_paused() -> None:
    gc.disable()
    with heap.loading():
        pass
    assert not gc.isenabled()
