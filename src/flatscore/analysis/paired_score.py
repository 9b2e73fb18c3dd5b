"""The success-difference interval, paired test and TOST on per-task differences (docs/
analysis.md, "Statistical choices").

Per task i the difference d_i = rate_ref,i − rate_arm,i lies in [−1, 1] (with one trial per
arm it is −1, 0 or 1); the estimate is their task-weighted mean. Tasks are the clusters and
trials are nested in them, so the per-task differences are the independent units.

Two statistics, chosen per study by the data alone (never by the confidence level, so test,
interval and TOST always agree):
- **t on per-task differences** (the paired, clustered interval of Miller 2024) when at least
  `DISCORDANT_MIN` tasks are discordant (d ≠ 0) and the differences are not all equal: mean ±
  t(n − 1) · sd / √n. It uses the variance the data show, so with several trials per task it
  is as narrow as the true-variance interval (≤ 1.04× from 30 tasks up with ≥ 12 discordant
  tasks, in the coverage simulation, tests/analysis/test_coverage.py).
- **Tango's (1998) score interval** on the discordant counts otherwise. With few discordant
  tasks a CLT interval under-covers (Bowyer, Aitchison & Ivanova 2025: 30 tasks × 1 trial
  with rare discordance, 87.5% for t), and with none it collapses to [0, 0]; the score
  interval does neither. Here b = Σ max(d, 0) and c = Σ max(−d, 0) (fractional with trials)
  and the interval is every Δ whose statistic Z(Δ) = (b − c − nΔ) / sqrt(n (2 p̂₂₁(Δ) +
  Δ(1 − Δ))) (p̂₂₁ the restricted maximum-likelihood estimate) stays within ±z. It bounds a
  task's variance by a binary one's: conservative with trials, which matters little here,
  since it is only used when the data have few discordant tasks.

The paired test (Δ = 0) and TOST (±margin, one-sided) use the chosen statistic, so an
interval that excludes 0 always comes with p < alpha, and "equivalent" means exactly that the
(1 − 2·alpha) interval lies inside ±margin. Everything is vectorised over leading axes (the
coverage simulation evaluates thousands of studies at once).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm
from scipy.stats import t as student_t

_BISECTIONS = 45  # the bracket [−1, 1] shrinks to < 1e-13
CONTINUITY = 0.0
"""Continuity correction of b − c in the score statistic. Half a step (0.5) was needed when
the score interval was used at every size (coverage dips at 114 tasks without it); used only
for studies with few discordant tasks, it over-covers (99.5–100% at 30 tasks), so it is off."""
DISCORDANT_MIN = 6
"""Discordant tasks (d ≠ 0) from which the t statistic is used: with 6 or more, coverage is
≥ 93% in every simulated condition; the score interval below that (chosen by simulation among
4, 6, 8 and 12, see docs/analysis.md)."""
METHOD = (
    "success differences: paired t-interval on per-task differences (tasks are clusters, "
    f"trials averaged within a task, task-weighted), or Tango's score interval when fewer than "
    f"{DISCORDANT_MIN} tasks are discordant or all differences are equal"
)
TEST = (
    "paired t-test on per-task success differences (McNemar's score test when fewer than "
    f"{DISCORDANT_MIN} tasks are discordant); TOST on the same statistic"
)


@dataclass(frozen=True)
class Discordance:
    """b, c (positive and negative parts of the per-task differences, summed) and n tasks."""

    b: np.ndarray
    c: np.ndarray
    n: int

    @property
    def estimate(self) -> np.ndarray:
        return (self.b - self.c) / self.n


def discordance(differences: np.ndarray) -> Discordance:
    """From per-task differences d (..., tasks), each in [−1, 1]."""
    d = np.asarray(differences, dtype=np.float64)
    return Discordance(
        b=np.clip(d, 0.0, None).sum(axis=-1), c=np.clip(-d, 0.0, None).sum(axis=-1), n=d.shape[-1]
    )


def score_z(
    dis: Discordance, delta: np.ndarray | float, continuity: float = CONTINUITY
) -> np.ndarray:
    """Tango's score statistic at Δ = delta (decreasing in Δ; ±inf where its variance is 0)."""
    b, c, n = dis.b, dis.c, float(dis.n)
    delta = np.asarray(delta, dtype=np.float64)
    a = 2.0 * n
    bb = -b - c + (2.0 * n - b + c) * delta
    cc = -c * delta * (1.0 - delta)
    p21 = (-bb + np.sqrt(np.maximum(bb * bb - 4.0 * a * cc, 0.0))) / (2.0 * a)
    var = n * (2.0 * p21 + delta * (1.0 - delta))
    raw = b - c - n * delta
    num = np.sign(raw) * np.maximum(np.abs(raw) - continuity, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = num / np.sqrt(var)
        edge = np.where(num == 0, 0.0, np.sign(num) * np.inf)
    return np.where(var > 1e-15, z, edge)


def score_interval(
    differences: np.ndarray, confidence: float = 0.95, continuity: float = CONTINUITY
) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided score interval for the mean per-task difference (bisection on Z(Δ))."""
    dis = discordance(differences)
    q = float(norm.ppf(0.5 + confidence / 2.0))
    est = dis.estimate
    lo_out, lo_in = np.full_like(est, -1.0), est.copy()  # Z(lo_out) > q ≥ Z(lo_in)
    hi_in, hi_out = est.copy(), np.full_like(est, 1.0)
    lo_ok = score_z(dis, -1.0, continuity) <= q  # the interval reaches −1
    hi_ok = score_z(dis, 1.0, continuity) >= -q
    for _ in range(_BISECTIONS):
        mid = (lo_out + lo_in) / 2.0
        inside = score_z(dis, mid, continuity) <= q
        lo_in, lo_out = np.where(inside, mid, lo_in), np.where(inside, lo_out, mid)
        mid = (hi_in + hi_out) / 2.0
        inside = score_z(dis, mid, continuity) >= -q
        hi_in, hi_out = np.where(inside, mid, hi_in), np.where(inside, hi_out, mid)
    return np.where(lo_ok, -1.0, lo_in), np.where(hi_ok, 1.0, hi_in)


def score_test(differences: np.ndarray) -> np.ndarray:
    """Two-sided p-value of Δ = 0 (McNemar's score test on the fractional discordant counts;
    p = 1 when no task is discordant)."""
    dis = discordance(differences)
    z = score_z(dis, 0.0)
    return np.where(dis.b + dis.c > 0, 2.0 * norm.sf(np.abs(np.nan_to_num(z))), 1.0)


def score_tost(
    differences: np.ndarray, margin: float, alpha: float = 0.05
) -> tuple[np.ndarray, np.ndarray]:
    """TOST within ±margin on the same statistic: p = the larger one-sided p-value, equivalent
    when p < alpha (⇔ the 1 − 2·alpha score interval lies inside ±margin)."""
    dis = discordance(differences)
    p_low = norm.sf(score_z(dis, -margin))  # H0: Δ ≤ −margin
    p_high = norm.cdf(score_z(dis, margin))  # H0: Δ ≥ margin
    p = np.maximum(p_low, p_high)
    return p, p < alpha


def uses_t(differences: np.ndarray) -> np.ndarray:
    """Where (per study) the t statistic is used: ≥ DISCORDANT_MIN discordant tasks and a
    nonzero spread of the differences."""
    d = np.asarray(differences, dtype=np.float64)
    return ((d != 0).sum(axis=-1) >= DISCORDANT_MIN) & (d.std(axis=-1) > 0)


def _t_parts(d: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Mean, standard error (1 where the other statistic is used) and degrees of freedom."""
    n = d.shape[-1]
    se = d.std(axis=-1, ddof=1) / np.sqrt(n) if n > 1 else np.zeros(d.shape[:-1])
    return d.mean(axis=-1), np.where(se > 0, se, 1.0), max(n - 1, 1)


def paired_interval(
    differences: np.ndarray, confidence: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided interval for the mean per-task difference (t where `uses_t`, else score)."""
    d = np.asarray(differences, dtype=np.float64)
    mean, se, df = _t_parts(d)
    half = float(student_t.ppf(0.5 + confidence / 2.0, df)) * se
    s_lo, s_hi = score_interval(d, confidence)
    use = uses_t(d)
    lo = np.where(use, np.clip(mean - half, -1.0, 1.0), s_lo)
    hi = np.where(use, np.clip(mean + half, -1.0, 1.0), s_hi)
    return lo, hi


def paired_test(differences: np.ndarray) -> np.ndarray:
    """Two-sided p-value of Δ = 0 on the statistic `paired_interval` uses."""
    d = np.asarray(differences, dtype=np.float64)
    mean, se, df = _t_parts(d)
    return np.where(uses_t(d), 2.0 * student_t.sf(np.abs(mean) / se, df), score_test(d))


def paired_tost(
    differences: np.ndarray, margin: float, alpha: float = 0.05
) -> tuple[np.ndarray, np.ndarray]:
    """TOST within ±margin on the same statistic: p = the larger one-sided p-value, equivalent
    when p < alpha (⇔ the 1 − 2·alpha `paired_interval` lies inside ±margin)."""
    d = np.asarray(differences, dtype=np.float64)
    mean, se, df = _t_parts(d)
    t_p = np.maximum(
        student_t.sf((mean + margin) / se, df), student_t.cdf((mean - margin) / se, df)
    )
    p = np.where(uses_t(d), t_p, score_tost(d, margin, alpha)[0])
    return p, p < alpha


def paired_difference_interval(
    differences: np.ndarray, confidence: float = 0.95
) -> tuple[float | None, float | None]:
    """One study's interval as floats (None without tasks)."""
    d = np.asarray(differences, dtype=np.float64)
    if d.size == 0:
        return None, None
    lo, hi = paired_interval(d, confidence)
    return float(lo), float(hi)


def wilson_interval(
    rates: np.ndarray, confidence: float = 0.95
) -> tuple[float | None, float | None]:
    """Wilson score interval for a task-weighted success rate (per-task rates in [0, 1],
    averaged): the one-sample counterpart of the paired interval, conservative with trials."""
    x = np.asarray(rates, dtype=np.float64)
    n = x.size
    if n == 0:
        return None, None
    p = float(x.mean())
    z = float(norm.ppf(0.5 + confidence / 2.0))
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    lo = 0.0 if p == 0.0 else max(0.0, float(centre - half))
    hi = 1.0 if p == 1.0 else min(1.0, float(centre + half))
    return lo, hi
