"""Inter-rater agreement: Cohen's kappa for two raters, Krippendorff's alpha for any number.

Both take categorical ratings (strings or numbers); alpha also ordinal ratings given as an ordered list
of categories. Written from the definitions (Cohen 1960; Krippendorff 2011, "Computing Krippendorff's
alpha-reliability"), checked in the tests against scikit-learn's ``cohen_kappa_score`` and the
``krippendorff`` package.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """Cohen's kappa of two raters' labels of the same units: (p_o - p_e) / (1 - p_e).

    NaN when it is undefined (no units, or both raters used one and the same label throughout)."""
    if len(a) != len(b):
        raise ValueError(f"the two raters rated {len(a)} and {len(b)} units: they must rate the same units")
    if not len(a):
        return float("nan")
    labels = sorted(set(a) | set(b), key=str)
    index = {label: i for i, label in enumerate(labels)}
    table = np.zeros((len(labels), len(labels)))
    for x, y in zip(a, b, strict=True):
        table[index[x], index[y]] += 1
    table /= table.sum()
    observed = np.trace(table)
    expected = float(table.sum(axis=1) @ table.sum(axis=0))
    return float("nan") if expected == 1 else float((observed - expected) / (1 - expected))


def krippendorff_alpha(
    ratings: Sequence[Sequence[Hashable | None]], ordered: Sequence[Hashable] | None = None
) -> float:
    """Krippendorff's alpha: ``ratings[r][u]`` is rater r's value for unit u, None when not rated.

    Nominal distance by default; with ``ordered`` (the categories, lowest first) the ordinal distance.
    Units rated by fewer than two raters do not count. NaN when no unit is pairable or all values agree
    by construction (expected disagreement 0)."""
    units = list(zip(*ratings, strict=True)) if ratings else []
    values = sorted({v for unit in units for v in unit if v is not None}, key=str)
    if ordered is not None:
        unknown = set(values) - set(ordered)
        if unknown:
            raise ValueError(f"values {sorted(unknown, key=str)} are not among the ordered categories")
        values = list(ordered)
    index = {v: i for i, v in enumerate(values)}
    k = len(values)
    coincidence = np.zeros((k, k))
    for unit in units:
        present = [index[v] for v in unit if v is not None]
        m = len(present)
        if m < 2:
            continue
        counts = np.bincount(present, minlength=k).astype(float)
        coincidence += (np.outer(counts, counts) - np.diag(counts)) / (m - 1)
    n_c = coincidence.sum(axis=0)
    n = n_c.sum()
    if n == 0:
        return float("nan")
    if ordered is None:
        delta = 1.0 - np.eye(k)
    else:  # ordinal: (sum of n_g from c to k, minus half the ends)^2
        cum = np.cumsum(n_c)
        delta = np.zeros((k, k))
        for c in range(k):
            for d in range(k):
                lo, hi = min(c, d), max(c, d)
                delta[c, d] = (cum[hi] - (cum[lo - 1] if lo else 0.0) - (n_c[lo] + n_c[hi]) / 2) ** 2
    observed = float((coincidence * delta).sum())
    expected = float((np.outer(n_c, n_c) * delta).sum()) / (n - 1)
    return float("nan") if expected == 0 else 1.0 - observed / expected
