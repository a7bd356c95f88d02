"""A bounded map of the most recently used values, safe to share between threads."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

V = TypeVar("V")
D = TypeVar("D")


class RecentValues(Generic[V]):
    """The newest ``capacity`` values put (a hit counts as a use); older ones are let go."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self._kept: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, default: D = None) -> V | D:  # type: ignore[assignment]
        with self._lock:
            if key not in self._kept:
                return default
            self._kept.move_to_end(key)
            return self._kept[key]

    def put(self, key: Hashable, value: V) -> None:
        with self._lock:
            self._kept[key] = value
            self._kept.move_to_end(key)
            while len(self._kept) > self.capacity:
                self._kept.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
