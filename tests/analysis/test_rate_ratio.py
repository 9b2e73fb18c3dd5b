"""The task-clustered rate ratio test (analysis/rate_ratio.py) and the amplification decision
(comparison.amplified after Holm): known answers, invariants, and seeded simulations of the
issue-26 done-when (false flags under the null, power for a planted ×2 channel)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from flatscore.analysis.comparison import decide
from flatscore.analysis.rate_ratio import RatioTest, rate_ratio_test


def test_known_answer() -> None:
    """Three tasks, by hand: ratio (6/30)/(4/30) = 1.5; the jackknife leaves one task out
    of both arms at a time."""
    ya, xa, yr, xr = [1, 2, 3], [10, 10, 10], [1, 1, 2], [10, 10, 10]
    t = rate_ratio_test(np.array(ya), np.array(xa), np.array(yr), np.array(xr))
    loo = [math.log((5 / 20) / (3 / 20)), math.log((4 / 20) / (3 / 20)), math.log(1.5)]
    mean = sum(loo) / 3
    se = math.sqrt(2 / 3 * sum((v - mean) ** 2 for v in loo))
    z = math.log(1.5) / se
    assert t.ratio == pytest.approx(1.5)
    assert t.p_value == pytest.approx(2 * stats.t.sf(z, 2))
    q = stats.t.ppf(0.975, 2)
    assert float(t.ci_low) == pytest.approx(1.5 * math.exp(-q * se))
    assert float(t.ci_high) == pytest.approx(1.5 * math.exp(q * se))


def test_no_test_where_it_does_not_exist() -> None:
    one = np.array([[0, 0, 5.0]])  # every failure in one task: leaving it out gives ratio 0
    t = rate_ratio_test(one, np.ones((1, 3)), np.array([[1.0, 1, 1]]), np.ones((1, 3)))
    assert np.isnan(t.p_value[0]) and np.isnan(t.ratio[0])
    none = rate_ratio_test(np.zeros(3), np.ones(3), np.ones(3), np.ones(3))
    assert np.isnan(none.p_value) and np.isnan(none.ci_low)
    same = rate_ratio_test(np.ones(4), np.ones(4), np.ones(4), np.ones(4))
    assert same.ratio == 1.0 and same.p_value == 1.0  # identical arms: no evidence at all


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(4, 12), scale=st.floats(0.1, 10))
def test_invariants(seed: int, n: int, scale: float) -> None:
    """Swapping the arms inverts the ratio and its interval with the same p; scaling an
    arm's failures and calls together (another unit) changes nothing; nor does task order."""
    rng = np.random.default_rng(seed)
    ya, yr = rng.integers(1, 20, size=(2, n)).astype(float)
    xa, xr = rng.integers(20, 40, size=(2, n)).astype(float)
    t, s = rate_ratio_test(ya, xa, yr, xr), rate_ratio_test(yr, xr, ya, xa)
    assert s.ratio == pytest.approx(1 / t.ratio)
    assert float(s.ci_low) == pytest.approx(1 / t.ci_high)
    assert float(s.ci_high) == pytest.approx(1 / t.ci_low)
    assert s.p_value == pytest.approx(t.p_value)
    r = rate_ratio_test(ya * scale, xa * scale, yr, xr)
    assert float(r.ratio) == pytest.approx(t.ratio) and float(r.p_value) == pytest.approx(t.p_value)
    perm = rng.permutation(n)
    moved = rate_ratio_test(ya[perm], xa[perm], yr[perm], xr[perm])
    assert float(moved.ratio) == pytest.approx(t.ratio)
    assert float(moved.p_value) == pytest.approx(t.p_value)


# ---------------------------------------------------------------- simulations (seeded)

TASKS, TRIALS = 114, 4
RATES = (0.05, 0.002, 0.005, 0.01, 0.02, 0.03, 0.1, 0.2)
"""Reference channel rates per agent call: the planted channel first, then the others."""


def simulate(studies: int, multiplier: np.ndarray, seed: int) -> tuple[np.ndarray, ...]:
    """Per-task mean failures (studies × channels × tasks) and calls (studies × 1 × tasks)
    of a reference and an arm on the same tasks. Heterogeneity as in real agent logs: calls
    per episode vary by task (gamma, mean 8), each task has its own propensity per channel
    (gamma, shape 0.5: most failures come from a few tasks), shared by both arms (paired);
    trials are independent given the task."""
    rng = np.random.default_rng(seed)
    shape = (studies, 1, TASKS, 1)
    calls_mean = rng.gamma(2.0, 4.0, size=shape)
    propensity = rng.gamma(0.5, 2.0, size=(studies, len(RATES), TASKS, 1))
    p = np.minimum(np.asarray(RATES)[None, :, None, None] * propensity, 1.0)
    out = []
    for m in (np.ones(len(RATES)), multiplier):
        calls = rng.poisson(calls_mean, size=(studies, 1, TASKS, TRIALS))
        fails = rng.binomial(calls, np.minimum(p * m[None, :, None, None], 1.0))
        out += [fails.mean(axis=-1), calls.mean(axis=-1)]
    return tuple(out)


def flagged(multiplier: np.ndarray, studies: int, seed: int, family: int) -> np.ndarray:
    """(studies × channels) amplified after Holm over a family of `family` comparisons (the
    arm's tested channels, padded with null p-values to the family's size)."""
    yr, xr, ya, xa = simulate(studies, multiplier, seed)
    return decisions(rate_ratio_test(ya, xa, yr, xr), family)


def decisions(t: RatioTest, family: int) -> np.ndarray:
    studies = t.p_value.shape[0]
    out = np.zeros(t.p_value.shape, dtype=bool)
    for s in range(studies):
        ok = ~np.isnan(t.p_value[s])
        pad = [1.0] * (family - int(ok.sum()))
        ratios = [*t.ratio[s][ok], *[1.0] * len(pad)]
        _, up = decide([r > 1 for r in ratios], [*t.p_value[s][ok], *pad], "holm", 0.05)
        out[s, ok] = up[: int(ok.sum())]
    return out


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    ci = stats.binomtest(k, n).proportion_ci(0.95, method="exact")
    return ci.low, ci.high


def test_null_flags_at_most_five_percent_per_arm() -> None:
    """Both arms with the same channel rates, 114 × 4, Holm over the arm's 8 channels: some
    channel flagged amplified in ≤ 5% of studies (family-wise). 2,000 studies: the exact 95%
    interval of the false-flag rate must lie below 5% (seen: 44 / 2,000 = 2.2%,
    [1.6%, 2.9%])."""
    yr, xr, ya, xa = simulate(2000, np.ones(len(RATES)), seed=26)
    t = rate_ratio_test(ya, xa, yr, xr)
    hits = decisions(t, family=len(RATES)).any(axis=1)
    lo, hi = clopper_pearson(int(hits.sum()), hits.size)
    print(f"null: {hits.sum()} / {hits.size} flagged, 95% CI [{lo:.3f}, {hi:.3f}]")
    assert hi <= 0.05, (hits.mean(), lo, hi)
    # Calibrated, not only valid: each channel's uncorrected test rejects about 5% of the
    # time (seen 4.2–5.8% for rates ≥ 1%), neither far above nor far below.
    common = np.asarray(RATES) >= 0.01
    size = np.nanmean(np.where(np.isnan(t.p_value), np.nan, t.p_value < 0.05), axis=0)
    print("per-channel size at 0.05:", np.round(size, 3))
    assert np.all((size[common] > 0.03) & (size[common] < 0.075)), size


def test_planted_double_is_flagged() -> None:
    """One channel ×2 at a 5% reference rate, the rest unchanged, Holm over a study-sized
    family of 31: flagged in ≥ 80% of studies (the exact 95% interval's lower end), and the
    unchanged channels stay below 5% family-wise."""
    m = np.ones(len(RATES))
    m[0] = 2.0
    hits = flagged(m, 1000, seed=27, family=31)
    lo, hi = clopper_pearson(int(hits[:, 0].sum()), hits.shape[0])
    others = hits[:, 1:].any(axis=1).mean()
    print(f"power: {hits[:, 0].sum()} / {hits.shape[0]}, [{lo:.3f}, {hi:.3f}]; others {others}")
    assert lo >= 0.80, hits[:, 0].mean()
    assert hits[:, 1:].any(axis=1).mean() <= 0.05
