"""The success gap after a stop (docs/analysis.md, "Sequential verdicts", "Estimates after a
stop"): a repeated confidence interval at the look a comparison stopped at.

A comparison that stops early stops because a statistic crossed its boundary, so the sample
it stops on leans the way it crossed: the fixed design's interval on that sample covers the
true gap less often than it says. The repeated confidence interval of Jennison & Turnbull
(2000, ch. 9) at look k is the set of gaps δ that neither one-sided paired test
(`paired_score.paired_one_sided`, the damage test's statistic, on the tasks read) rejects at
that look's group-sequential boundary c_k: Hwang–Shih–DeCani spending at α/2 on each side
with the damage test's γ, at the comparison's looks. Such intervals hold the true gap at
every look at once with probability ≥ 1 − α, so the one at the look a comparison stopped at
holds it whatever made it stop (looking only there is one of the ways to look).

Each one-sided test compares its statistic Z(δ) with a fixed quantile (t(n − 1) for the
empirical-likelihood statistic, the normal for Tango's), so that set is the fixed design's
own interval (`paired_score.paired_interval`, the same root finding) at confidence
1 − 2Φ(−c_k) — plus δ = 0 where the exact sign-flip p that the tests use there (differences
all of one sign) does not reject. Not corrected for multiplicity across comparisons, as the
fixed design's intervals are not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from flatscore.analysis.paired_score import paired_interval, paired_one_sided
from flatscore.analysis.sequential import SequentialDesign, boundaries

TEST = "damage"
"""The group-sequential test whose boundaries (γ, looks) the interval inverts."""


@dataclass(frozen=True)
class StopIntervals:
    """Per study (leading axes): the gap at the stop look (mean per-task difference, ref −
    arm), its repeated confidence interval, the paired tasks it rests on, and the
    confidence a fixed design would need for the same interval (1 − 2Φ(−c_k))."""

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    tasks: np.ndarray
    nominal: np.ndarray


def look_boundaries(maximum: int, design: SequentialDesign) -> np.ndarray:
    """c_k at each look of a comparison with `maximum` paired tasks: each side at α/2."""
    return boundaries(maximum, design, TEST, design.alpha / 2.0)


def _rejects_zero(head: np.ndarray, c: float) -> np.ndarray:
    """Whether either one-sided test rejects δ = 0 at boundary c (as `sequential.look_stats`
    reads p: Z = Φ⁻¹(1 − p))."""
    z = [norm.isf(paired_one_sided(head, 0.0, upper=up)) for up in (True, False)]
    return (np.nan_to_num(z[0], nan=-np.inf) >= c) | (np.nan_to_num(z[1], nan=-np.inf) >= c)


def repeated_intervals(
    differences: np.ndarray,
    look: np.ndarray,
    counts: list[int],
    maximum: int,
    design: SequentialDesign,
) -> StopIntervals:
    """The repeated confidence interval of the gap at look `look` (an index into `counts`,
    per study) of per-task differences (..., tasks) read in order, for a comparison whose
    design has `maximum` paired tasks (`counts`: the looks the data reach)."""
    d = np.asarray(differences, dtype=np.float64)
    lead = d.shape[:-1]
    flat = d.reshape(-1, d.shape[-1])
    at = np.broadcast_to(np.asarray(look, dtype=np.int64), lead).reshape(-1)
    c_all = look_boundaries(maximum, design)
    out = {k: np.full(flat.shape[0], np.nan) for k in ("estimate", "low", "high", "nominal")}
    tasks = np.zeros(flat.shape[0], dtype=np.int64)
    for k in np.unique(at):
        rows = at == k
        n = counts[int(k)]
        head, c = flat[rows, :n], float(c_all[int(k)])
        if np.isfinite(c):
            nominal = 1.0 - 2.0 * float(norm.sf(c))
            low, high = paired_interval(head, nominal)
            keep = ~_rejects_zero(head, c)
            low, high = (
                np.where(keep, np.minimum(low, 0.0), low),
                np.where(keep, np.maximum(high, 0.0), high),
            )
        else:  # a look that may spend nothing rejects nothing
            nominal, low, high = 1.0, np.full(head.shape[0], -1.0), np.full(head.shape[0], 1.0)
        out["estimate"][rows] = head.mean(axis=-1)
        out["low"][rows], out["high"][rows], out["nominal"][rows] = low, high, nominal
        tasks[rows] = n
    return StopIntervals(
        estimate=out["estimate"].reshape(lead),
        low=out["low"].reshape(lead),
        high=out["high"].reshape(lead),
        tasks=tasks.reshape(lead),
        nominal=out["nominal"].reshape(lead),
    )
