"""What a viewed region is, once for every reader of runs: a step whose action is ``crop`` (GIANT, the
random-region ablation, a plug-in) or ``patch`` (the patch baseline) and whose level-0 box [x, y, w, h]
is four finite numbers with a positive size. The viewer, the review, the QuPath export, the ROI
evaluation and the path review all count through here, so they agree on which boxes an agent saw."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

REGION_ACTIONS = ("crop", "patch")
MAX_BOX = 1e12  # no slide is this large; a larger number is a broken record, not a region
BOX_COLUMNS = ["box_x", "box_y", "box_w", "box_h"]


def finite_box(values: Any) -> list[float] | None:
    """Four finite numbers (|v| < ``MAX_BOX``) with a positive width and height, as floats; else None."""
    if isinstance(values, str | bytes) or values is None:
        return None
    try:
        box = [float(v) for v in values]
    except (TypeError, ValueError, OverflowError):
        return None
    if len(box) != 4 or not all(math.isfinite(v) and abs(v) < MAX_BOX for v in box) or min(box[2:]) <= 0:
        return None
    return box


def viewed_box(action: Any, box: Any) -> list[float] | None:
    """The box of a step that viewed a region (see the module), else None."""
    return finite_box(box) if action in REGION_ACTIONS else None


def viewed_steps(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The trajectory steps (dicts) that viewed a region, in trajectory order."""
    return [s for s in steps if viewed_box(s.get("action"), s.get("box")) is not None]


def viewed_rows(steps: pd.DataFrame) -> pd.DataFrame:
    """The rows of a ``trajectory_steps`` table that viewed a region (same rule as ``viewed_steps``),
    decided for all rows at once."""
    if not len(steps):
        return steps
    box = steps[BOX_COLUMNS].apply(pd.to_numeric, errors="coerce").to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        keep = (
            steps["action"].isin(REGION_ACTIONS).to_numpy()
            & (np.isfinite(box) & (np.abs(box) < MAX_BOX)).all(axis=1)
            & (box[:, 2:] > 0).all(axis=1)
        )
    return steps[keep]
