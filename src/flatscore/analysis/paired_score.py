"""The success-difference interval, paired test and TOST on per-task differences (docs/
analysis.md, "Statistical choices").

Per task i the difference d_i = rate_ref,i − rate_arm,i lies in [−1, 1] (with one trial per
arm it is −1, 0 or 1); the estimate is their task-weighted mean. Tasks are the clusters and
trials are nested in them, so the per-task differences are the independent units.

Two statistics, chosen per study by the data alone (never by the confidence level, so test,
interval and TOST always agree):
- **The nonparametric score statistic** when at least `DISCORDANT_MIN` tasks are discordant
  (d ≠ 0) and the differences are not all equal: Z(Δ) = (mean − Δ)·√n / σ̃(Δ), where σ̃²(Δ) is
  the variance of d under the maximum-likelihood distribution on the observed values whose
  mean is Δ (the empirical-likelihood weights p = f / (1 + η(u − Δ)) of Owen 1988, 2001),
  referred to Student's t(n − 1). It is the score test of the empirical likelihood, and with
  one trial per task (d ∈ {−1, 0, 1}, both signs seen) exactly Tango's statistic below. Why
  not the t-interval of Miller (2024): its standard error is estimated at the sample mean,
  and with one-sided changes (coupled trials, a true gap) the per-task differences are
  skewed, so a low mean comes with a low spread and the one-sided tests of TOST reject too
  often (6.0% at a true gap equal to the margin, 114 tasks × 4 coupled trials, 40,000
  simulated studies; 4.9% here). The variance restricted to the hypothesis moves with Δ, as
  the score interval's does for a proportion. With several trials per task it is as narrow
  as the true-variance interval (1.01–1.12× from 30 tasks up with ≥ 12 discordant tasks, in the
  coverage simulation, tests/analysis/test_coverage.py).
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

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm
from scipy.stats import t as student_t

from flatscore.defaults import ALPHA, CONFIDENCE

_BISECTIONS = 45  # the bracket [−1, 1] shrinks to < 1e-13
_MAX_NEWTON = 100  # safeguarded Newton steps (a handful suffice; bisection bounds the rest)
_TOL = 1e-12
CONTINUITY = 0.0
"""Continuity correction of b − c in the score statistic. Half a step (0.5) was needed when
the score interval was used at every size (coverage dips at 114 tasks without it); used only
for studies with few discordant tasks, it over-covers (99.5–100% at 30 tasks), so it is off."""
DISCORDANT_MIN = 6
"""Discordant tasks (d ≠ 0) from which the nonparametric score statistic is used: with 6 or
more, coverage is ≥ 93% in every simulated condition; Tango's score interval below that
(chosen by simulation among 4, 6, 8 and 12 for the t statistic, and kept: docs/analysis.md).
Six discordant tasks all of one sign are also the fewest an exact sign test can call
significant (p = 2/64)."""
TEST = (
    "paired score test on per-task success differences (empirical-likelihood variance, "
    f"t(n − 1); McNemar's score test when fewer than {DISCORDANT_MIN} tasks are discordant); "
    "TOST on the same statistic"
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
    differences: np.ndarray, confidence: float = CONFIDENCE, continuity: float = CONTINUITY
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
    differences: np.ndarray, margin: float, alpha: float = ALPHA
) -> tuple[np.ndarray, np.ndarray]:
    """TOST within ±margin on the same statistic: p = the larger one-sided p-value, equivalent
    when p < alpha (⇔ the 1 − 2·alpha score interval lies inside ±margin)."""
    dis = discordance(differences)
    p_low = norm.sf(score_z(dis, -margin))  # H0: Δ ≤ −margin
    p_high = norm.cdf(score_z(dis, margin))  # H0: Δ ≥ margin
    p = np.maximum(p_low, p_high)
    return p, p < alpha


def uses_el(differences: np.ndarray) -> np.ndarray:
    """Where (per study) the empirical likelihood is used: ≥ DISCORDANT_MIN discordant tasks
    and a nonzero spread of the differences (so the mean lies strictly inside their range)."""
    d = np.asarray(differences, dtype=np.float64)
    return ((d != 0).sum(axis=-1) >= DISCORDANT_MIN) & (d.std(axis=-1) > 0)


def _support(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values u of the differences and each study's share f (rows × values) of
    tasks at each: the likelihood only sees these, and there are few (multiples of 1/trials)."""
    u = np.unique(d)
    return u, (d[..., None] == u).mean(axis=-2)


def _el_weights(
    u: np.ndarray, f: np.ndarray, delta: np.ndarray, eta: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The nonparametric maximum-likelihood distribution of the differences with mean Δ on
    the observed values (Owen's empirical-likelihood weights, 2001, ch. 2–3):
    p = f / (1 + η(u − Δ)), η the root of Σ f (u − Δ) / (1 + η(u − Δ)) = 0, by Newton's method
    kept inside its bracket (bisection where a step leaves it). Δ must lie strictly inside
    each study's range of differences. Returns p, u − Δ and η (a warm start for the next Δ)."""
    obs = f > 0
    w = np.where(obs, u - delta[:, None], 0.0)
    with np.errstate(divide="ignore"):
        lo = -1.0 / np.where(obs, w, -np.inf).max(axis=-1)  # the sum is +inf just above lo
        hi = -1.0 / np.where(obs, w, np.inf).min(axis=-1)  # and −inf just below hi
    x = np.zeros_like(delta) if eta is None else eta
    x = np.where((x > lo) & (x < hi), x, (lo + hi) / 2.0)
    for _ in range(_MAX_NEWTON):
        q = 1.0 + x[:, None] * w
        g = (f * w / q).sum(axis=-1)  # decreasing in η
        slope = -(f * w * w / (q * q)).sum(axis=-1)
        lo, hi = np.where(g > 0, x, lo), np.where(g > 0, hi, x)
        step = x - g / slope
        step = np.where((step > lo) & (step < hi), step, (lo + hi) / 2.0)
        done = np.abs(step - x) <= _TOL * (1.0 + np.abs(x))
        x = step
        if done.all():
            break
    return f / (1.0 + x[:, None] * w), w, x


def _z(
    d: np.ndarray, u: np.ndarray, f: np.ndarray, delta: np.ndarray, eta: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Z(Δ) = (mean − Δ)·√n / σ̃(Δ), σ̃² = Σ p (u − Δ)² under the restricted weights p; ±inf
    outside the range of the differences. Also returns σ̃ and η."""
    n = d.shape[-1]
    mean, low, high = d.mean(axis=-1), d.min(axis=-1), d.max(axis=-1)
    inside = (delta > low) & (delta < high)
    p, w, eta = _el_weights(u, f, np.where(inside, delta, mean), eta)
    sd = np.sqrt((p * w * w).sum(axis=-1))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (mean - delta) * np.sqrt(n) / sd
    return np.where(inside, z, np.where(delta <= low, np.inf, -np.inf)), sd, eta


def el_score_z(differences: np.ndarray, delta: np.ndarray | float) -> np.ndarray:
    """The nonparametric score statistic Z(Δ) per study (rows of a 2-D array; studies whose
    differences have a spread): decreasing in Δ, ±inf outside the differences' range (no
    distribution on the observed values has that mean)."""
    d = np.atleast_2d(np.asarray(differences, dtype=np.float64))
    delta = np.broadcast_to(np.asarray(delta, dtype=np.float64), d.shape[:1]).copy()
    u, f = _support(d)
    return _z(d, u, f, delta)[0]


def el_score_interval(
    differences: np.ndarray, confidence: float = CONFIDENCE
) -> tuple[np.ndarray, np.ndarray]:
    """{Δ: |Z(Δ)| ≤ t(n − 1)} per study (rows): each end by a Newton-like step on |Z| with the
    slope √n/σ̃ (exact but for σ̃'s own change) from the
    t-interval's end, then secant steps, kept inside its bracket (the mean, and the smallest or
    largest difference)."""
    d = np.atleast_2d(np.asarray(differences, dtype=np.float64))
    n = d.shape[-1]
    u, f = _support(d)
    q = float(student_t.ppf(0.5 + confidence / 2.0, n - 1))
    mean, se = d.mean(axis=-1), d.std(axis=-1, ddof=1) / np.sqrt(n)
    ends = []
    for side, edge in ((-1.0, d.min(axis=-1)), (1.0, d.max(axis=-1))):
        inner, outer = mean.copy(), edge  # |Z| − q: < 0 at inner, > 0 near outer
        x = np.clip(mean + side * q * se, np.minimum(inner, outer), np.maximum(inner, outer))
        x = np.where(x == edge, (inner + outer) / 2.0, x)
        eta: np.ndarray | None = None
        last_x = last_h = None
        for _ in range(_MAX_NEWTON):
            z, sd, eta = _z(d, u, f, x, eta)
            h = np.abs(z) - q
            inner, outer = np.where(h < 0, x, inner), np.where(h < 0, outer, x)
            step = x - side * h * sd / np.sqrt(n)  # Newton with slope ±√n/σ̃, then secant
            if last_x is not None and last_h is not None:
                with np.errstate(divide="ignore", invalid="ignore"):
                    step = np.where(h != last_h, x - h * (x - last_x) / (h - last_h), step)
            last_x, last_h = x, h
            kept = np.isfinite(step) & ((step - inner) * side >= 0) & ((outer - step) * side >= 0)
            step = np.where(np.abs(h) < _TOL, x, np.where(kept, step, (inner + outer) / 2.0))
            done = np.abs(step - x) <= _TOL
            x = step
            if done.all():
                break
        ends.append(x)
    return ends[0], ends[1]


def _on_el_rows(
    d: np.ndarray, compute: Callable[[np.ndarray], tuple[np.ndarray, ...]], outputs: int
) -> tuple[np.ndarray, ...]:
    """`compute` on the studies that use the empirical likelihood only (the others have no
    interior to search), scattered back to the leading shape; NaN elsewhere."""
    flat = d.reshape(-1, d.shape[-1])
    use = uses_el(flat)
    out = [np.full(flat.shape[0], np.nan) for _ in range(outputs)]
    if use.any():
        for full, part in zip(out, compute(flat[use]), strict=True):
            full[use] = part
    return tuple(full.reshape(d.shape[:-1]) for full in out)


def paired_interval(
    differences: np.ndarray, confidence: float = CONFIDENCE
) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided interval for the mean per-task difference (EL where `uses_el`, else score)."""
    d = np.asarray(differences, dtype=np.float64)
    lo, hi = score_interval(d, confidence)
    if d.shape[-1] < 2:
        return lo, hi
    use = uses_el(d)
    if use.any():
        e_lo, e_hi = _on_el_rows(d, lambda x: el_score_interval(x, confidence), 2)
        lo, hi = np.where(use, e_lo, lo), np.where(use, e_hi, hi)
    return lo, hi


def _el_p(d: np.ndarray, delta: float, tail: str) -> np.ndarray:
    """One p-value per study from Z(delta) and t(n − 1) (NaN where the score statistic is used):
    'both' two-sided, 'upper' for H0: Δ ≤ delta, 'lower' for H0: Δ ≥ delta."""
    df = max(d.shape[-1] - 1, 1)

    def p(x: np.ndarray) -> tuple[np.ndarray]:
        r = el_score_z(x, delta)
        if tail == "both":
            return (2.0 * student_t.sf(np.abs(r), df),)
        return (student_t.sf(r, df) if tail == "upper" else student_t.cdf(r, df),)

    (out,) = _on_el_rows(d, p, 1)
    return out


def sign_flip_p(differences: np.ndarray) -> np.ndarray:
    """The exact sign-flip p-value of differences all of one sign: 2^(1 − k), k the tasks
    with d ≠ 0 (under Δ = 0 each task's difference is as likely negated; the observed signs
    are the most extreme of the 2^k, on either side). NaN where both signs occur."""
    d = np.asarray(differences, dtype=np.float64)
    k = (d != 0).sum(axis=-1)
    one_signed = ((d >= 0).all(axis=-1) | (d <= 0).all(axis=-1)) & (k > 0)
    return np.where(one_signed, 2.0 ** (1.0 - k), np.nan)


def paired_test(differences: np.ndarray) -> np.ndarray:
    """Two-sided p-value of Δ = 0 on the statistic `paired_interval` uses — except where
    every discordant task has one sign: there Δ = 0 is the edge of the differences' range,
    the only distribution on them with mean 0 has no spread, and the score statistic is
    infinite (p = 0, whatever k). The exact sign-flip p, 2^(1 − k), is used instead: the
    same verdict at α = 0.05 (k ≥ `DISCORDANT_MIN` = 6 gives ≤ 1/32, so test and 95%
    interval still agree), but a p that multiplicity correction can use (six one-signed
    tasks: 0.031, which Holm over four comparisons makes 0.125, not 0)."""
    d = np.asarray(differences, dtype=np.float64)
    use = uses_el(d)
    edge = sign_flip_p(d)
    return np.where(
        use & ~np.isnan(edge), edge, np.where(use, _el_p(d, 0.0, "both"), score_test(d))
    )


def paired_tost(
    differences: np.ndarray, margin: float, alpha: float = ALPHA
) -> tuple[np.ndarray, np.ndarray]:
    """TOST within ±margin on the same statistic: p = the larger one-sided p-value, equivalent
    when p < alpha (⇔ the 1 − 2·alpha `paired_interval` lies inside ±margin)."""
    d = np.asarray(differences, dtype=np.float64)
    el_p = np.maximum(_el_p(d, -margin, "upper"), _el_p(d, margin, "lower"))
    p = np.where(uses_el(d), el_p, score_tost(d, margin, alpha)[0])
    return p, p < alpha


def paired_one_sided(differences: np.ndarray, delta: float, upper: bool) -> np.ndarray:
    """One-sided p-value on the statistic `paired_interval` uses: H0 Δ ≤ delta when `upper`
    (evidence that the mean difference is above delta), else H0 Δ ≥ delta. As in
    `paired_test`, differences all of one sign at delta = 0 get the exact sign-flip p (one
    side: 2^(−k)) rather than the score statistic's 0. The group-sequential looks of
    `sequential` read their statistics from here."""
    d = np.asarray(differences, dtype=np.float64)
    z = score_z(discordance(d), delta)
    score = norm.sf(z) if upper else norm.cdf(z)
    el = _el_p(d, delta, "upper" if upper else "lower") if d.shape[-1] >= 2 else score
    p = np.where(uses_el(d), el, score)
    if delta == 0:
        edge = sign_flip_p(d) / 2.0
        towards = (d >= 0).all(axis=-1) if upper else (d <= 0).all(axis=-1)
        p = np.where(uses_el(d) & ~np.isnan(edge) & towards, edge, p)
    return p


def paired_difference_interval(
    differences: np.ndarray, confidence: float = CONFIDENCE
) -> tuple[float | None, float | None]:
    """One study's interval as floats (None without tasks)."""
    d = np.asarray(differences, dtype=np.float64)
    if d.size == 0:
        return None, None
    lo, hi = paired_interval(d, confidence)
    return float(lo), float(hi)


def wilson_interval(
    rates: np.ndarray, confidence: float = CONFIDENCE
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
