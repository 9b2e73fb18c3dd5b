"""The ratio of two task-clustered failure rates, arm / reference, with its test, its interval
and the bounds that clear an arm (docs/analysis.md, "Statistical choices": channel
amplification; "Failures cluster in tasks").

A channel rate is Σ_tasks failures / Σ_tasks calls over per-task means, on the same tasks in
both arms, and the ratio is ρ̂ = (Y_a / X_a) / (Y_r / X_r). Its test is the **task-clustered
score test**: under "rate_arm = θ · rate_ref" the common rate is profiled out (λ = (Y_a +
Y_r) / (θ X_a + X_r)) and each task contributes one score

    s_i(θ) = (X_r (y_ai − θ λ x_ai) − θ X_a (y_ri − λ x_ri)) / (θ X_a + X_r),

with Σ s_i(θ) = (X_r Y_a − θ X_a Y_r) / (θ X_a + X_r), zero exactly at θ = ρ̂: the
statistic is the paired t over tasks of these scores, mean / (SD / √n), referred to Student's
t with m − 1 degrees of freedom, m the tasks where either arm failed (`informative_df`) —
the task is the unit, and each task's score is computed under the hypothesis tested (a
score test), not from the estimate. With equal calls in both
arms it is the paired t-test of the per-task failure-count differences. The interval is the
span of the θ the same test does not reject (a Fieller-type set, searched on a grid of log θ
and refined at its ends), so "1 outside the interval" and "p < α" agree.

Why this test (simulation on smooth gamma-propensity data and on studies resampled from
the committed archives, docs/analysis.md): the leave-one-task-out jackknife it replaces
explodes when one task holds most of the reference's failures (study v3 telecom, 422 failed
calls against 22, 20 of them in one task: ×5.83, 95% CI ×0.06 to ×572, p = 1); a Wald
(sandwich) variance taken at the estimate is dominated by the same task. The score's
variance under the hypothesis weighs that task as one task among thirty: p < 0.001 there.
A statistic normalised by its own per-task spread cannot be carried by one looping task
(one task with forty failures gives t ≈ 1). Where the reference's failures are essentially
one task's, no task-clustered test can bound the ratio from above: the interval's upper end
is then unbounded (+inf), not a number five orders of magnitude away.

The bound that clears an arm ("no amplification") is on two scales at once: the ratio below
`ratio_margin` (reachable when the reference fails often) or the extra failed calls per agent
call below `difference_margin` (reachable when it fails rarely), each one-sided at α/2, so
the claim holds at α whichever scale a study reaches. The difference's test is its
task-clustered (sandwich) t with n − 1 degrees of freedom.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats

from flatscore.defaults import CONFIDENCE

METHOD = (
    "rate ratio (Σ per-task mean failures / Σ per-task mean calls, arm over reference) with a "
    "task-clustered score test (the common rate profiled out; the paired t of per-task "
    "scores, Student t with df = tasks where either arm failed − 1; two-sided p) and the "
    "interval that inverts it"
)
LOG_THETA_RANGE = 12.0
"""Interval ends searched within e^±12; an end beyond it is reported unbounded (0 or +inf)."""


@dataclass(frozen=True)
class RatioTest:
    """Arrays over the leading axes of the inputs. `ratio` and `p_value` are NaN where the
    ratio or the test does not exist (no failures at all, no calls, fewer than 2 tasks);
    `ci_low` = 0 and `ci_high` = +inf where the data cannot bound that side."""

    ratio: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    p_value: np.ndarray


Parts = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _parts(y_arm: np.ndarray, x_arm: np.ndarray, y_ref: np.ndarray, x_ref: np.ndarray) -> Parts:
    ya, xa, yr, xr = np.broadcast_arrays(
        *(np.asarray(a, dtype=np.float64) for a in (y_arm, x_arm, y_ref, x_ref))
    )
    return ya, xa, yr, xr


def informative_df(y_arm: np.ndarray, y_ref: np.ndarray) -> np.ndarray:
    """Degrees of freedom of the score test: the tasks where either arm failed, less one
    (at least 1). A task where neither failed says nothing about the direction, and with a
    sparse channel (five tasks holding all its failures) Student t on n − 1 = 113 df would
    claim the precision of 114 tasks (docs/analysis.md, "Failures cluster in tasks")."""
    ya, yr = np.broadcast_arrays(np.asarray(y_arm, float), np.asarray(y_ref, float))
    return np.maximum(((ya > 0) | (yr > 0)).sum(axis=-1) - 1, 1)


def score_t(
    y_arm: np.ndarray,
    x_arm: np.ndarray,
    y_ref: np.ndarray,
    x_ref: np.ndarray,
    theta: float | np.ndarray = 1.0,
) -> np.ndarray:
    """The task-clustered score statistic for "rate ratio = θ" over the last axis (tasks):
    the paired t of the per-task scores, positive when the arm's rate is above θ times the
    reference's; NaN where no test exists (no failures in either arm, no calls, fewer than
    two tasks); ±inf where every task's score is the same nonzero number, 0 where all are 0."""
    ya, xa, yr, xr = _parts(y_arm, x_arm, y_ref, x_ref)
    Ya, Xa, Yr, Xr = (a.sum(axis=-1, keepdims=True) for a in (ya, xa, yr, xr))
    th = np.asarray(theta, dtype=np.float64)
    th = th[..., None] if th.ndim else th
    n = ya.shape[-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = (Ya + Yr) / (th * Xa + Xr)
        s = (Xr * (ya - th * lam * xa) - th * Xa * (yr - lam * xr)) / (th * Xa + Xr)
        mean = s.mean(axis=-1)
        sd = s.std(axis=-1, ddof=1) if n >= 2 else np.full(mean.shape, np.nan)
        se = sd / np.sqrt(n)
        scale = np.abs(s).max(axis=-1)
        spread = se > 1e-12 * np.where(scale > 0, scale, 1.0)
        flat = np.where(np.abs(mean) > 1e-12 * np.where(scale > 0, scale, 1.0), mean, 0.0)
        constant = np.where(flat == 0, 0.0, np.sign(flat) * np.inf)
        t = np.where(spread, mean / np.where(spread, se, 1.0), constant)
    exists = ((Ya + Yr)[..., 0] > 0) & (Xa[..., 0] > 0) & (Xr[..., 0] > 0) & (n >= 2)
    return np.where(exists, t, np.nan)


def ratio_p(
    y_arm: np.ndarray,
    x_arm: np.ndarray,
    y_ref: np.ndarray,
    x_ref: np.ndarray,
    theta: float = 1.0,
    alternative: Literal["greater", "less"] = "greater",
) -> np.ndarray:
    """One-sided p for "rate ratio above θ" (`alternative="less"`: below θ); NaN: no test.
    The sequential looks use it above 1, the bound on failed calls below its margin."""
    t = score_t(y_arm, x_arm, y_ref, x_ref, theta)
    df = informative_df(y_arm, y_ref)
    tail = stats.t.sf if alternative == "greater" else stats.t.cdf
    return np.where(np.isnan(t), np.nan, tail(np.nan_to_num(t), df))


def difference_p_below(
    y_arm: np.ndarray,
    x_arm: np.ndarray,
    y_ref: np.ndarray,
    x_ref: np.ndarray,
    margin: float,
) -> np.ndarray:
    """One-sided p for "rate_arm − rate_ref below `margin`" (extra failed calls per agent
    call): the task-clustered (sandwich) t of the rate difference, n − 1 df; NaN where no
    test exists (no calls, fewer than 2 tasks, no spread)."""
    ya, xa, yr, xr = _parts(y_arm, x_arm, y_ref, x_ref)
    n = ya.shape[-1]
    Ya, Xa, Yr, Xr = (a.sum(axis=-1, keepdims=True) for a in (ya, xa, yr, xr))
    with np.errstate(divide="ignore", invalid="ignore"):
        ra, rr = Ya / Xa, Yr / Xr
        phi = (ya - ra * xa) / (Xa / n) - (yr - rr * xr) / (Xr / n)
        se = np.sqrt((phi**2).sum(axis=-1) / (n * max(n - 1, 1)))
        t = ((ra - rr)[..., 0] - margin) / se
    ok = ~np.isnan(t) & (n >= 2)  # −inf: no spread and the difference below the margin
    return np.where(ok, stats.t.cdf(np.where(ok, t, 0.0), max(n - 1, 1)), np.nan)


def bound_p(
    y_arm: np.ndarray,
    x_arm: np.ndarray,
    y_ref: np.ndarray,
    x_ref: np.ndarray,
    ratio_margin: float,
    difference_margin: float,
) -> np.ndarray:
    """One-sided p for "no amplification": ratio below `ratio_margin` or extra failed calls
    per agent call below `difference_margin`, each at half the level (Bonferroni): 2 × the
    smaller p, capped at 1; NaN where neither test exists."""
    r = ratio_p(y_arm, x_arm, y_ref, x_ref, ratio_margin, "less")
    d = difference_p_below(y_arm, x_arm, y_ref, x_ref, difference_margin)
    best = np.fmin(r, d)
    return np.where(np.isnan(best), np.nan, np.minimum(1.0, 2.0 * best))


GRID = 121
"""Points of the log-θ grid the interval is searched on (a step of 0.2 on ±12)."""


BLOCK = 128
"""Rows of the grid evaluated at once (a block of rows × GRID × tasks floats)."""


def _refine(parts: Parts, q: np.ndarray, inside: np.ndarray, outside: np.ndarray) -> np.ndarray:
    """Bisection, row by row, between an accepted and a rejected log θ."""
    for _ in range(32):
        mid = (inside + outside) / 2
        t = score_t(*parts, np.exp(mid))
        keep = ~(np.abs(t) > q)
        inside, outside = np.where(keep, mid, inside), np.where(keep, outside, mid)
    return inside


def _interval(parts: Parts, q: np.ndarray, log_ratio: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of (rows × tasks) arrays: the span of the θ that the score test does not
    reject at level q, anchored at the point (where the score sums to 0, always accepted: an
    interval narrower than the grid's step is still found); 0 / +inf where it reaches the
    end of the searched range."""
    grid = np.linspace(-LOG_THETA_RANGE, LOG_THETA_RANGE, GRID)
    rows = parts[0].shape[0]
    low, high = np.full(rows, np.nan), np.full(rows, np.nan)
    for start in range(0, rows, BLOCK):
        ya, xa, yr, xr = (a[start : start + BLOCK] for a in parts)
        block = (ya, xa, yr, xr)
        qb = q[start : start + BLOCK]
        point = np.clip(log_ratio[start : start + BLOCK], -LOG_THETA_RANGE, LOG_THETA_RANGE)
        t = score_t(ya[:, None], xa[:, None], yr[:, None], xr[:, None], np.exp(grid)[None, :])
        accepted = ~(np.abs(t) > qb[:, None])  # NaN (no spread) cannot reject
        some = accepted.any(axis=-1)
        first = grid[np.argmax(accepted, axis=-1)]
        last = grid[GRID - 1 - np.argmax(accepted[:, ::-1], axis=-1)]
        inside_lo = np.where(some, np.minimum(first, point), point)
        inside_hi = np.where(some, np.maximum(last, point), point)
        below = np.searchsorted(grid, inside_lo, side="left") - 1  # a rejected grid point
        above = np.searchsorted(grid, inside_hi, side="right")
        lo = _refine(block, qb, inside_lo, grid[np.maximum(below, 0)])
        hi = _refine(block, qb, inside_hi, grid[np.minimum(above, GRID - 1)])
        low[start : start + BLOCK] = np.where(below < 0, 0.0, np.exp(lo))
        high[start : start + BLOCK] = np.where(above >= GRID, np.inf, np.exp(hi))
    return low, high


def rate_ratio_test(
    y_arm: np.ndarray,
    x_arm: np.ndarray,
    y_ref: np.ndarray,
    x_ref: np.ndarray,
    confidence: float = CONFIDENCE,
    interval: bool = True,
) -> RatioTest:
    """(Σ y_arm / Σ x_arm) / (Σ y_ref / Σ x_ref) over the last axis (tasks), with the
    `confidence` interval that inverts the score test (NaN with `interval` off: a simulation
    that needs only the test) and its two-sided p for ratio = 1."""
    parts = _parts(y_arm, x_arm, y_ref, x_ref)
    n = parts[0].shape[-1]
    Ya, Xa, Yr, Xr = (a.sum(axis=-1) for a in parts)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (Ya / Xa) / (Yr / Xr)
    t = score_t(*parts)
    df = informative_df(parts[0], parts[2])
    ok = np.isfinite(ratio) & (ratio > 0) & ~np.isnan(t) & (n >= 2)  # ±inf: no spread
    p = 2.0 * stats.t.sf(np.abs(np.nan_to_num(t)), df)
    q = np.asarray(stats.t.ppf(0.5 + confidence / 2.0, df), dtype=np.float64)
    low = high = np.full(ratio.shape, np.nan)
    if interval:
        fa, ca, fr, cr = (a.reshape(-1, n) for a in parts)
        flat = (fa, ca, fr, cr)
        q_rows = np.broadcast_to(q, ratio.shape).reshape(-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            log_ratio = np.nan_to_num(np.log(ratio), nan=0.0).reshape(-1)
        low, high = (e.reshape(ratio.shape) for e in _interval(flat, q_rows, log_ratio))
    low = np.where(ok, np.fmin(low, ratio), np.nan)
    high = np.where(ok, np.fmax(high, ratio), np.nan)
    return RatioTest(
        ratio=np.where(ok, ratio, np.nan),
        ci_low=low,
        ci_high=high,
        p_value=np.where(ok, p, np.nan),
    )
