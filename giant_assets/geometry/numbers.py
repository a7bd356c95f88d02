"""Strict conversion of user coordinates (JSON lists or numpy arrays) to float64 arrays.

Only real numbers are coordinates: a string (``"10"``), a boolean (``true``), ``null`` or a nested
object is refused with a message naming the offending value, never coerced. Integers too large for a
float (e.g. 400 digits) and magnitudes above ``MAX_COORDINATE`` are refused as well, so areas and
squared distances can never overflow to infinity.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

MAX_COORDINATE = 1e150
_NUMERIC_KINDS = "iuf"


def _first_non_number(value: Any, depth: int) -> tuple[bool, Any]:
    """(True, leaf) for the first leaf of nested lists that is not a real number, else (False, None)."""
    stack = [(value, depth)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, list | tuple):
            if level == 0:
                return True, item
            stack.extend((v, level - 1) for v in reversed(item))
        elif isinstance(item, np.ndarray):
            if item.dtype.kind not in _NUMERIC_KINDS:
                return True, item
        elif isinstance(item, bool | np.bool_) or not isinstance(
            item, int | float | np.integer | np.floating
        ):
            return True, item
    return False, None


def numeric_array(value: Any, name: str, max_depth: int = 2) -> NDArray[np.float64]:
    """``value`` as a float64 array of real numbers; raises ValueError naming ``name`` otherwise.

    ``max_depth`` is how deeply lists may nest (2 for a list of boxes or points).
    """
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in _NUMERIC_KINDS:
            raise ValueError(f"{name}: expected numbers, got an array of {value.dtype}")
        arr = value.astype(np.float64, copy=False)
    else:
        if not isinstance(value, list | tuple):
            raise ValueError(f"{name}: expected a list of numbers, got {type(value).__name__} {value!r:.80}")
        found, bad = _first_non_number(value, max_depth)
        if found:
            kind = "a list nested too deeply" if isinstance(bad, list | tuple) else type(bad).__name__
            raise ValueError(f"{name}: expected numbers, got {kind} {bad!r:.80}")
        try:
            arr = np.asarray(value, dtype=np.float64)
        except OverflowError:
            raise ValueError(
                f"{name}: a coordinate is too large for a float (more than ~308 digits)"
            ) from None
        except ValueError as exc:  # ragged rows
            raise ValueError(f"{name}: expected rows of equal length ({exc})") from None
    if not np.isfinite(arr).all():
        raise ValueError(f"{name}: coordinates must be finite, got NaN or infinity")
    if arr.size and np.abs(arr).max() > MAX_COORDINATE:
        raise ValueError(
            f"{name}: coordinates beyond +-{MAX_COORDINATE:g} are refused (areas would overflow)"
        )
    return arr
