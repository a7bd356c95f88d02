"""USD amounts as shown to a user: an unknown cost (NaN: a model without a price) says so, never $nan."""

from __future__ import annotations

import math
from typing import Any

UNKNOWN_USD = "unknown (no price)"


def usd_text(value: Any, digits: int = 4) -> str:
    """``$0.1234`` (``digits`` decimals), or ``unknown (no price)`` for NaN."""
    usd = float(value)
    return UNKNOWN_USD if math.isnan(usd) else f"${usd:.{digits}f}"
