"""Protein-structure metrics of spec 001: RMSD, TM-score and GDT-TS over matched residue coordinates.

Inputs are two (N, 3) arrays of corresponding atoms (e.g. C-alpha, residue i of the model with residue i
of the reference). The model is first superposed on the reference by the least-squares rotation and
translation (Kabsch algorithm), then:

* RMSD = sqrt(mean squared distance);
* TM-score = mean over residues of 1 / (1 + (d_i / d0)^2), d0 = 1.24 (N - 15)^(1/3) - 1.8 (at least
  0.5), normalised by the reference length N (Zhang & Skolnick 2004);
* GDT-TS = mean over the cutoffs 1, 2, 4 and 8 Å of the fraction of residues within the cutoff.

The official TM-score and LGA programs search many superpositions to maximise their scores; the single
least-squares superposition used here gives the same value for near-identical structures and a lower
bound otherwise (documented in docs/grading.md). N must be at least 3.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

GDT_CUTOFFS = (1.0, 2.0, 4.0, 8.0)


def _coords(model: ArrayLike, reference: ArrayLike) -> tuple[NDArray, NDArray]:
    a, b = np.asarray(model, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] != 3 or a.shape != b.shape:
        raise ValueError(f"expected two (N, 3) coordinate arrays of equal shape, got {a.shape} and {b.shape}")
    if len(a) < 3:
        raise ValueError(f"at least 3 residues are needed, got {len(a)}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("coordinates must be finite")
    return a, b


def superpose(model: ArrayLike, reference: ArrayLike) -> NDArray[np.float64]:
    """The model's coordinates after the least-squares (Kabsch) rotation + translation onto the reference."""
    a, b = _coords(model, reference)
    ca, cb = a.mean(axis=0), b.mean(axis=0)
    u, _, vt = np.linalg.svd((a - ca).T @ (b - cb))
    d = np.sign(np.linalg.det(u @ vt))  # no reflection
    rotation = u @ np.diag([1.0, 1.0, d]) @ vt
    return (a - ca) @ rotation + cb


def _distances(model: ArrayLike, reference: ArrayLike) -> NDArray[np.float64]:
    return np.linalg.norm(superpose(model, reference) - np.asarray(reference, dtype=np.float64), axis=1)


def rmsd(model: ArrayLike, reference: ArrayLike) -> float:
    """Root mean square deviation after optimal superposition (Å if the inputs are in Å)."""
    return float(np.sqrt(np.mean(_distances(model, reference) ** 2)))


def tm_score(model: ArrayLike, reference: ArrayLike) -> float:
    """TM-score in (0, 1] after the least-squares superposition, normalised by the reference length."""
    d = _distances(model, reference)
    d0 = max(0.5, 1.24 * np.cbrt(max(len(d) - 15, 0)) - 1.8)
    return float(np.mean(1.0 / (1.0 + (d / d0) ** 2)))


def gdt_ts(model: ArrayLike, reference: ArrayLike) -> float:
    """GDT-TS in [0, 1]: mean fraction of residues within 1, 2, 4 and 8 Å after superposition."""
    d = _distances(model, reference)
    return float(np.mean([(d <= c).mean() for c in GDT_CUTOFFS]))
