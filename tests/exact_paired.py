"""Exact yardsticks for the paired success-difference interval (docs/analysis.md, "Coverage,
by simulation"): what an exact method gives where our interval over-covers.

Issue 26 lets the interval over-cover where data are few and discrete, "but no wider than an
exact method's". Two inverted exact tests, used by the coverage simulation to hold our
interval to that:

- **Exact unconditional** (one trial per task: each task is a paired binary outcome, b tasks
  won by the reference, c by the arm, of n): Tango's score statistic (`paired_score.score_z`),
  with the p-value the largest tail probability over the nuisance discordance rate
  ψ = p₁₀ + p₀₁ (Suissa & Shuster 1985; Hsueh, Liu & Chen 2001), ψ restricted to a
  1 − γ Clopper–Pearson interval and γ added back (Berger & Boos 1994): valid for every
  (p₁₀, p₀₁), so its coverage is ≥ 95% whatever the truth. The mid-p version counts ties
  at half weight (no longer guaranteed). The supremum is taken on a grid of ψ, so the
  p-value can only be slightly too small: the yardstick is, if anything, too narrow.
- **Exact sign-flip** (any number of trials): the permutation distribution of the centred
  differences dᵢ − Δ under random signs, enumerated exactly over the distinct values of d
  (counts per value, a product of binomials). Exact only when the differences are
  symmetric about Δ: with one-sided changes (a gap under seed-coupled trials) it
  under-covers (86% at 30 tasks × 1 trial, coupled, 90% success, gap 5), so it is printed
  beside, never a yardstick for validity.

Intervals are the hull of {Δ: p(Δ) > α}, read on a grid of Δ, since neither p-value is
monotone in Δ (at 30 tasks the exact unconditional test of (b, c) = (6, 15) rejects a Δ
between its estimate −0.3 and 0, but not 0, p = 0.053; bisection alone from the estimate
stopped there, and the interval covered 94.7% at p₁₀ = p₀₁ = 0.35); the exact unconditional
ends are then refined by bisection. Both are computed once per distinct sufficient
statistic ((n, b, c), or the value counts), since simulated conditions repeat them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numpy as np
from scipy.special import gammaln
from scipy.stats import beta, binom

from flatscore.analysis.paired_score import Discordance, score_z

GAMMA = 1e-4
"""Berger–Boos: the nuisance is searched in a 1 − GAMMA interval and GAMMA added to p."""
NUISANCE_GRID = 24
BISECTIONS = 10
SCAN = 50
"""Grid intervals of Δ on [−1, 1] read before the ends are refined."""
SIGN_FLIP_GRID = np.linspace(-1.0, 1.0, 2001)
K = TypeVar("K")


class ExactUnconditional:
    """The exact unconditional test of Δ = p₁₀ − p₀₁ for n paired binary outcomes (Tango's
    statistic orders the outcome space (b, c)), and its inverted interval; vectorised over
    the observed outcomes (rows)."""

    def __init__(self, n: int, mid_p: bool = False) -> None:
        self.n, self.mid_p = n, mid_p
        b, c = np.meshgrid(np.arange(n + 1.0), np.arange(n + 1.0), indexing="ij")
        keep = b + c <= n
        self.b, self.c = b[keep], c[keep]
        self.rest = n - self.b - self.c
        self.log_coef = gammaln(n + 1.0) - gammaln(self.b + 1) - gammaln(self.c + 1)
        self.log_coef = self.log_coef - gammaln(self.rest + 1)

    def nuisance_bounds(self, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The 1 − GAMMA Clopper–Pearson interval of ψ from the b + c discordant of n."""
        m, n = b + c, self.n
        lo = np.where(m > 0, beta.ppf(GAMMA / 2, np.maximum(m, 1), n - m + 1), 0.0)
        hi = np.where(m < n, beta.ppf(1 - GAMMA / 2, m + 1, np.maximum(n - m, 1)), 1.0)
        return lo, hi

    def p_value(
        self, b: np.ndarray, c: np.ndarray, delta: np.ndarray, bounds: tuple[np.ndarray, np.ndarray]
    ) -> np.ndarray:
        """Two-sided p of Δ = delta per row, having seen (b, c): the largest probability over
        ψ in the Berger–Boos set of an outcome at least as extreme in |Z|, plus GAMMA."""
        n, delta = self.n, np.asarray(delta, dtype=np.float64)
        lo, hi = np.maximum(bounds[0], np.abs(delta)), np.minimum(bounds[1], 1.0)
        empty = lo > hi  # no ψ in the set reaches |Δ|
        hi = np.maximum(hi, lo)
        # Outcomes with more discordant tasks than any ψ ≤ max(hi) makes plausible are left
        # out; their probability bound is added to p (conservative).
        top = float(hi.max())
        m_max = int(binom.isf(1e-12, n, top)) if top < 1 else n
        sub = self.b + self.c <= m_max
        left_out = float(binom.sf(m_max, n, top)) if m_max < n else 0.0
        ob, oc = self.b[sub], self.c[sub]
        z_all = score_z(Discordance(b=ob[None, :], c=oc[None, :], n=n), delta[:, None])
        z_obs = score_z(Discordance(b=b[:, None], c=c[:, None], n=n), delta[:, None])
        z_all, z_obs = np.abs(z_all), np.abs(z_obs)
        both_inf = np.isinf(z_all) & np.isinf(z_obs)
        tol = 1e-9 * np.maximum(1.0, np.where(np.isfinite(z_obs), z_obs, 1.0))
        with np.errstate(invalid="ignore"):
            tie = both_inf | (np.abs(z_all - z_obs) <= tol)
        beyond = (z_all > z_obs + tol) & ~tie
        weight = beyond + (0.5 if self.mid_p else 1.0) * tie  # (rows × outcomes)
        psi = lo[:, None] + (hi - lo)[:, None] * np.linspace(0.0, 1.0, NUISANCE_GRID)
        p10, p01 = (psi + delta[:, None]) / 2, np.maximum((psi - delta[:, None]) / 2, 0.0)
        with np.errstate(divide="ignore"):  # log 0 → a huge negative: 0 · it = 0, k · it → p 0
            logs = np.maximum(np.log(np.stack([p10, p01, 1.0 - psi], axis=-1)), -1e300)
        counts = np.stack([ob, oc, self.rest[sub]], axis=-1)  # (outcomes × 3)
        logp = np.einsum("rgk,ok->rog", logs, counts) + self.log_coef[sub][None, :, None]
        tail = np.einsum("ro,rog->rg", weight, np.exp(logp, out=logp)).max(axis=1)
        return np.where(empty, GAMMA, np.minimum(1.0, tail + left_out + GAMMA))

    def intervals(
        self, b: np.ndarray, c: np.ndarray, alpha: float = 0.05
    ) -> tuple[np.ndarray, np.ndarray]:
        """{Δ: p(Δ) > alpha} per row, as its hull: p(Δ) need not be monotone, so it is read on
        a grid of Δ (step 0.04) and each end refined by bisection towards the next grid
        point out."""
        b, c = np.asarray(b, dtype=np.float64), np.asarray(c, dtype=np.float64)
        bounds = self.nuisance_bounds(b, c)
        est = (b - c) / self.n
        grid = np.linspace(-1.0, 1.0, SCAN + 1)
        kept = np.stack([self.p_value(b, c, np.full_like(est, g), bounds) > alpha for g in grid])
        kept |= np.abs(grid[:, None] - est) < 1e-12  # the estimate itself (p = 1)
        step = grid[1] - grid[0]
        ends = []
        for side in (-1.0, 1.0):
            # The outermost kept grid point on this side of the estimate (or the estimate).
            on_side = kept & ((grid[:, None] - est) * side >= 0)
            far = np.where(on_side, grid[:, None] * side, -np.inf).max(axis=0) * side
            with np.errstate(invalid="ignore"):
                inside = np.where(side * (far - est) >= 0, far, est)
            outside = np.clip(inside + side * step, -1.0, 1.0)
            at_edge = side * inside >= 1.0 - 1e-12
            for _ in range(BISECTIONS):
                mid = (inside + outside) / 2
                keep = self.p_value(b, c, mid, bounds) > alpha
                inside, outside = np.where(keep, mid, inside), np.where(keep, outside, mid)
            ends.append(np.where(at_edge, side, inside))
        return ends[0], ends[1]


_SOLVED: dict[tuple[int, bool, float, int, int], tuple[float, float]] = {}


def differences(b: int, c: int, n: int) -> np.ndarray:
    """Paired differences of `n` tasks: `b` where only the arm succeeded (+1), `c` where only
    the reference did (−1), the rest tied (0)."""
    return np.array([1.0] * b + [-1.0] * c + [0.0] * (n - b - c))


def exact_unconditional_intervals(
    differences: np.ndarray, alpha: float = 0.05, mid_p: bool = False, chunk: int = 16
) -> tuple[np.ndarray, np.ndarray]:
    """Per study (rows of per-task differences in {−1, 0, 1}: one trial per task), computed
    once per distinct (n, b, c) in the process (simulated conditions share most of them)."""
    d = np.atleast_2d(np.asarray(differences, dtype=np.float64))
    if not np.isin(d, (-1.0, 0.0, 1.0)).all():
        raise ValueError("exact unconditional intervals need one trial per task (d in {-1, 0, 1})")
    n = d.shape[1]
    bc = np.stack([(d > 0).sum(axis=1), (d < 0).sum(axis=1)], axis=1)
    keys = [(n, mid_p, alpha, int(b), int(c)) for b, c in bc]
    todo = np.array(sorted({k[3:] for k in keys if k not in _SOLVED}), dtype=np.float64)
    if len(todo):
        test = ExactUnconditional(n, mid_p)
        for s in range(0, len(todo), chunk):
            part = todo[s : s + chunk]
            lo, hi = test.intervals(part[:, 0], part[:, 1], alpha)
            for (b, c), lo_, hi_ in zip(part.astype(int), lo, hi, strict=True):
                _SOLVED[(n, mid_p, alpha, int(b), int(c))] = (float(lo_), float(hi_))
    out = np.array([_SOLVED[k] for k in keys], dtype=np.float64).reshape(-1, 2)
    return out[:, 0], out[:, 1]


def sign_flip_p(
    values: np.ndarray, counts: np.ndarray, deltas: np.ndarray, mid_p: bool = False
) -> np.ndarray:
    """Two-sided exact sign-flip p-value of H0: mean Δ, at each Δ of `deltas`, for per-task
    differences given as distinct `values` with their `counts`: P(|Σ sᵢ(dᵢ − Δ)| ≥ |Σ(dᵢ − Δ)|)
    over the 2ⁿ equally likely sign patterns s. The sum is A − Δ·B with A = Σ sᵢdᵢ and
    B = Σ sᵢ; the zeros add to B only, as 2Y − k₀ with Y ~ Bin(k₀, ½), so only the
    (∏ (k_v + 1)) sign counts of the non-zero values are enumerated."""
    values, counts = np.asarray(values, float), np.asarray(counts, int)
    nz = values != 0
    k0 = int(counts[~nz].sum())
    n = int(counts.sum())
    a, bnz, pa = np.zeros(1), np.zeros(1), np.ones(1)
    for u, k in zip(values[nz], counts[nz], strict=True):
        g = np.arange(k + 1)
        a = (a[:, None] + u * (2 * g - k)).ravel()
        bnz = (bnz[:, None] + (2 * g - k)).ravel()
        pa = (pa[:, None] * binom.pmf(g, k, 0.5)).ravel()
    dl = np.asarray(deltas, float)[None, :]
    obs = np.abs((values * counts).sum() - n * dl)
    eps = 1e-9
    shift = a[:, None] - dl * bnz[:, None] + dl * k0  # S = shift − 2ΔY
    with np.errstate(divide="ignore", invalid="ignore"):
        t1, t2 = (shift - obs) / (2 * dl), (shift + obs) / (2 * dl)
    low, high = np.where(dl > 0, t1, t2), np.where(dl > 0, t2, t1)  # |S| ≥ obs ⇔ Y ∉ (low, high)
    ge = binom.cdf(np.floor(low + eps), k0, 0.5) + binom.sf(np.ceil(high - eps) - 1, k0, 0.5)
    ge = np.where(low >= high - eps, 1.0, np.minimum(ge, 1.0))
    zero = np.abs(dl) < 1e-15
    ge = np.where(zero, (np.abs(a)[:, None] >= obs - eps) * 1.0, ge)
    p = (pa[:, None] * ge).sum(axis=0)
    if mid_p:

        def hit(t: np.ndarray) -> np.ndarray:
            r = np.round(np.nan_to_num(t, nan=-1.0, posinf=-1.0, neginf=-1.0))
            ok = (np.abs(np.nan_to_num(t) - r) < 1e-7) & (r >= 0) & (r <= k0)
            return np.where(ok, binom.pmf(np.where(ok, r, 0), k0, 0.5), 0.0)

        eq = hit(t1) + np.where(obs > eps, hit(t2), 0.0)
        eq = np.where(zero, (np.abs(np.abs(a)[:, None] - obs) < eps) * 1.0, eq)
        p = p - 0.5 * (pa[:, None] * eq).sum(axis=0)
    return p


def sign_flip_intervals(
    differences: np.ndarray, alpha: float = 0.05, mid_p: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Per study (rows): the ends of {Δ on SIGN_FLIP_GRID: p(Δ) > alpha} (NaN if none)."""
    d = np.atleast_2d(np.round(np.asarray(differences, dtype=np.float64), 9))

    def one(key: tuple[tuple[float, ...], tuple[int, ...]]) -> tuple[float, float]:
        p = sign_flip_p(np.array(key[0]), np.array(key[1]), SIGN_FLIP_GRID, mid_p)
        kept = SIGN_FLIP_GRID[p > alpha]
        return (float(kept.min()), float(kept.max())) if kept.size else (np.nan, np.nan)

    keys = []
    for row in d:
        u, k = np.unique(row, return_counts=True)
        keys.append((tuple(u.tolist()), tuple(k.tolist())))
    return _per_key(keys, one)


def _per_key(
    keys: list[K], compute: Callable[[K], tuple[float, float]]
) -> tuple[np.ndarray, np.ndarray]:
    """`compute` once per distinct key, spread back over the studies."""
    cache: dict[K, tuple[float, float]] = {}
    for k in keys:
        if k not in cache:
            cache[k] = compute(k)
    out = np.array([cache[k] for k in keys], dtype=np.float64).reshape(-1, 2)
    return out[:, 0], out[:, 1]
