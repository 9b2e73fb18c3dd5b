"""Group-sequential boundaries from an alpha-spending function (docs/analysis.md,
"Sequential verdicts").

A one-sided test looked at K times, at information fractions t_1 < … < t_K = 1 (here: paired
tasks read / the design's maximum), rejects at the first look k whose statistic Z_k reaches
the boundary c_k. Lan & DeMets (1983): the boundaries are chosen so that the probability,
under the null, of first crossing at look k is α(t_k) − α(t_{k−1}), for a spending function
α(t) rising from 0 to α at t = 1 — so the last look spends whatever the earlier ones left,
and the looks need not be equally spaced or planned in number. The Z_k of a statistic whose
score process has independent increments (a mean of independent tasks) are jointly normal
with corr(Z_j, Z_k) = √(t_j / t_k); the crossing probabilities are computed by the recursive
numerical integration of Armitage, McPherson & Rowe (1969) (Jennison & Turnbull 2000, ch. 19)
on a grid of the score S_k = Z_k·√t_k, with Simpson's rule.

Spending functions: the Hwang, Shih & DeCani (1990) family, α(t) = α·(1 − e^{−γt}) /
(1 − e^{−γ}) (γ = −4 is close to O'Brien–Fleming, γ = 1 to Pocock; γ = 0 is α·t), and Lan &
DeMets' O'Brien–Fleming type, α(t) = 2 − 2Φ(Φ⁻¹(1 − α/2)/√t).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm

Spending = Callable[[np.ndarray, float], np.ndarray]
"""α(t) for fractions t in [0, 1] and a total one-sided α."""

_GRID = 401  # grid points per look (odd, for Simpson's rule): boundaries within 1e-6 of 1601
_TAIL = 9.0  # the grid reaches 9 standard deviations below 0


def hsd(gamma: float) -> Spending:
    """Hwang–Shih–DeCani spending with parameter γ (γ = 0: linear in t)."""

    def spend(t: np.ndarray, alpha: float) -> np.ndarray:
        t = np.clip(np.asarray(t, dtype=np.float64), 0.0, 1.0)
        if gamma == 0:
            return alpha * t
        return alpha * (1.0 - np.exp(-gamma * t)) / (1.0 - np.exp(-gamma))

    return spend


def lan_demets_obf(t: np.ndarray, alpha: float) -> np.ndarray:
    """Lan–DeMets O'Brien–Fleming-type spending, one-sided α: 2 − 2Φ(z_{1−α/2}/√t)."""
    t = np.clip(np.asarray(t, dtype=np.float64), 0.0, 1.0)
    with np.errstate(divide="ignore"):
        return np.where(t > 0, 2.0 * norm.sf(norm.isf(alpha / 2.0) / np.sqrt(t)), 0.0)


def _simpson(n: int) -> np.ndarray:
    w = np.ones(n)
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return w / 3.0


def boundaries_for(fractions: Sequence[float], alpha: float, spending: Spending) -> np.ndarray:
    """Upper boundaries c_k (Z scale) for looks at `fractions` (increasing, in (0, 1]); the
    last look spends α(1) − α(t_{K−1}) when its fraction is 1. A look that may spend nothing
    gets c = +inf (it cannot reject)."""
    t = np.asarray(fractions, dtype=np.float64)
    if t.ndim != 1 or t.size == 0 or np.any(np.diff(t) <= 0) or t[0] <= 0 or t[-1] > 1:
        raise ValueError(f"look fractions must increase within (0, 1], got {list(t)}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    cum = np.asarray(spending(t, alpha), dtype=np.float64)
    spend = np.diff(np.concatenate([[0.0], cum]))
    out = np.empty(t.size)
    # Look 1: S_1 ~ N(0, t_1), no grid needed for its boundary.
    out[0] = norm.isf(spend[0]) if spend[0] > 0 else np.inf
    width = np.sqrt(t[0])
    top = out[0] * width if np.isfinite(out[0]) else _TAIL * width
    s = np.linspace(-_TAIL * width, top, _GRID)
    density = norm.pdf(s, scale=width)
    w = _simpson(_GRID) * (s[1] - s[0])
    for k in range(1, t.size):
        step = np.sqrt(t[k] - t[k - 1])
        mass = density * w  # the continuation region's probability, per grid point

        def exceed(b: float, mass: np.ndarray = mass, s: np.ndarray = s, step: float = step):
            return float(mass @ norm.sf((b - s) / step))

        width = np.sqrt(t[k])
        if spend[k] <= 0:
            out[k] = np.inf
        elif exceed(-_TAIL * width) <= spend[k]:  # can only happen with a huge α
            out[k] = -_TAIL
        else:
            b = brentq(
                lambda b, target=float(spend[k]): exceed(b) - target,
                -_TAIL * width,
                40.0 * width,
                xtol=1e-12,
            )
            out[k] = b / width
        top = out[k] * width if np.isfinite(out[k]) else s[-1] + _TAIL * step
        x = np.linspace(-_TAIL * width, top, _GRID)
        density = norm.pdf((x[:, None] - s[None, :]) / step) @ mass / step
        s, w = x, _simpson(_GRID) * (x[1] - x[0])
    return out


@functools.lru_cache(maxsize=512)
def hsd_boundaries(fractions: tuple[float, ...], alpha: float, gamma: float) -> np.ndarray:
    """`boundaries_for` with Hwang–Shih–DeCani spending (cached: a study's comparisons share
    their looks, and Holm's levels α/m, α/(m − 1), … repeat)."""
    out = boundaries_for(fractions, alpha, hsd(gamma))
    out.setflags(write=False)
    return out


def crossing_probability(fractions: Sequence[float], bounds: Sequence[float]) -> float:
    """P(Z_k ≥ c_k at some look) under the null, by the same recursion (for checks)."""
    t = np.asarray(fractions, dtype=np.float64)
    c = np.asarray(bounds, dtype=np.float64)
    total = float(norm.sf(c[0]))
    width = np.sqrt(t[0])
    top = c[0] * width if np.isfinite(c[0]) else _TAIL * width
    s = np.linspace(-_TAIL * width, top, _GRID)
    mass = norm.pdf(s, scale=width) * _simpson(_GRID) * (s[1] - s[0])
    for k in range(1, t.size):
        step, width = np.sqrt(t[k] - t[k - 1]), np.sqrt(t[k])
        if np.isfinite(c[k]):
            total += float(mass @ norm.sf((c[k] * width - s) / step))
        top = c[k] * width if np.isfinite(c[k]) else s[-1] + _TAIL * step
        x = np.linspace(-_TAIL * width, top, _GRID)
        density = norm.pdf((x[:, None] - s[None, :]) / step) @ mass / step
        s, mass = x, density * _simpson(_GRID) * (x[1] - x[0])
    return total
