"""No garbage collection while a process imports the code location; what it imported is frozen after.

Importing what ``giant_assets.platform.definitions`` needs (pandas, pyarrow, DuckDB, pydantic and the
platform on top of Dagster: about a million objects, next to none of them garbage) sets off hundreds of
collections, the full ones scanning everything imported so far; the run that follows scans it all again
in each full collection. ``with loading():`` around those imports stops both: no collection during them,
and what exists at the end of the block is left out of every later collection (``gc.freeze``). Objects
made later are collected as usual. What is given up: reference cycles that became garbage during the
imports are never freed (imports make next to none).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def loading() -> Iterator[None]:
    """Pause the collector for the block; then freeze what exists and collect as before."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
