"""Failure-set invariance (docs/analysis.md, "Definitions"): are the arm's hallucinated names
the reference's?

Spearman ρ of per-name hallucination counts over the union of names (zeros included), and
the novel fraction: share of the arm's hallucinated calls whose name the reference never
produced.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
from scipy.stats import spearmanr

from flatscore.analysis.outputs import NoteCode


def name_union(ref: Counter[str], arm: Counter[str]) -> list[str]:
    return sorted(set(ref) | set(arm))


def spearman_rho(ref: Counter[str], arm: Counter[str]) -> tuple[float | None, NoteCode | None]:
    """(ρ, why not): ρ is None when undefined (fewer than 2 names, or constant counts)."""
    names = name_union(ref, arm)
    if len(names) < 2:
        return None, "too_few_names"
    a = np.array([ref[n] for n in names], dtype=np.float64)
    b = np.array([arm[n] for n in names], dtype=np.float64)
    if np.all(a == a[0]) or np.all(b == b[0]):
        return None, "equal_counts"
    return float(spearmanr(a, b).statistic), None


def novel_fraction(ref: Counter[str], arm: Counter[str]) -> tuple[float | None, list[str]]:
    """(fraction, novel names): None when the arm hallucinated no calls."""
    total = sum(arm.values())
    novel = sorted(n for n in arm if ref[n] == 0 and arm[n] > 0)
    if total == 0:
        return None, novel
    return sum(arm[n] for n in novel) / total, novel


def rowwise_spearman(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Spearman ρ of each row of `a` with the same row of `b`, over the columns where the row
    is non-zero in `a` or `b` (NaN where fewer than 2 such columns or a row is constant).

    Each bootstrap row is one resample of tasks; a name that none of its tasks hallucinated is
    not in that resample's union, just as the point estimate ranks only the union. Ranking it
    as a tied (0, 0) pair would pull every resampled ρ towards +1 (the interval would then miss
    its own point estimate). Average ranks per row, then Pearson, as scipy.stats.spearmanr."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    present = (a != 0) | (b != 0)
    # Absent columns ranked below everything (−inf) shift every present rank by the same
    # count, which centring removes: the same ranks as omitting them, on the fast path.
    ra = rank_rows(np.where(present, a, -np.inf))
    rb = rank_rows(np.where(present, b, -np.inf))
    n = present.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        ra = np.where(present, ra - np.where(present, ra, 0.0).sum(axis=1, keepdims=True) / n, 0.0)
        rb = np.where(present, rb - np.where(present, rb, 0.0).sum(axis=1, keepdims=True) / n, 0.0)
        den = np.sqrt((ra * ra).sum(axis=1) * (rb * rb).sum(axis=1))
        num = (ra * rb).sum(axis=1)
        rho = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    return np.where(n[:, 0] >= 2, rho, np.nan)


def rank_rows(x: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, ties averaged) within each row: `scipy.stats.rankdata(x,
    axis=1)`, equal to it to the bit (ranks are exact half-integers), without its per-call
    overhead (the noise floor ranks hundreds of thousands of short rows)."""
    rows, m = x.shape
    order = np.argsort(x, axis=1)
    ordered = np.take_along_axis(x, order, axis=1)
    starts_group = np.ones((rows, m), dtype=bool)
    starts_group[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    flat = starts_group.ravel()
    group = np.cumsum(flat) - 1
    starts = np.flatnonzero(flat)
    size = np.diff(np.append(starts, flat.size))
    average = (starts % m) + (size + 1) / 2.0  # positions start..start+size−1, 1-based
    out = np.empty((rows, m))
    np.put_along_axis(out, order, average[group].reshape(rows, m), axis=1)
    return out
