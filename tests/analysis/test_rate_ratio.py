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
from flatscore.analysis.rate_ratio import (
    RatioTest,
    bound_p,
    difference_p_below,
    informative_df,
    rate_ratio_test,
    ratio_p,
    score_t,
)


def test_known_answer() -> None:
    """Three tasks with equal calls, by hand: ratio (6/30)/(4/30) = 1.5. Under ratio 1 the
    common rate is 10/60 and each task's score is half its count difference, (0, ½, ½):
    mean ⅓, SD √(1/12), t = ⅓ / (√(1/12) / √3) = 2 on 2 df. Three tasks cannot bound the
    ratio at 95% (t(θ) tends to −4.0 as θ grows, short of −t₀.₉₇₅(2) = −4.30)."""
    ya, xa, yr, xr = (np.array(v, float) for v in ([1, 2, 3], [10] * 3, [1, 1, 2], [10] * 3))
    t = rate_ratio_test(ya, xa, yr, xr)
    assert t.ratio == pytest.approx(1.5)
    assert float(score_t(ya, xa, yr, xr)) == pytest.approx(2.0)
    assert t.p_value == pytest.approx(2 * stats.t.sf(2.0, 2))
    assert float(t.ci_low) == 0.0 and float(t.ci_high) == np.inf
    # Eight tasks: the interval's ends are where t(θ) = ∓t₀.₉₇₅(7), around the point.
    ya, yr = np.array([1, 2, 3, 4, 2, 3, 5, 4.0]), np.array([1, 1, 2, 2, 1, 2, 2, 1.0])
    xa = xr = np.full(8, 10.0)
    t = rate_ratio_test(ya, xa, yr, xr)
    q = stats.t.ppf(0.975, 7)
    assert float(score_t(ya, xa, yr, xr, float(t.ci_low))) == pytest.approx(q, abs=1e-6)
    assert float(score_t(ya, xa, yr, xr, float(t.ci_high))) == pytest.approx(-q, abs=1e-6)
    assert 1.0 < float(t.ci_low) < 2.0 == float(t.ratio) < float(t.ci_high) < 4.0
    assert float(t.p_value) < 0.05  # 1 outside the interval


def test_known_answer_at_theta() -> None:
    """At θ = 2 with equal calls 10 a task: λ = (6 + 4) / (20 + 10) = 1/3, and task i's
    score is (10 (y_ai − 20/3) − 20 (y_ri − 10/3)) / 30 = (y_ai − 2 y_ri) / 3:
    (−⅓, 0, −⅓), mean −2/9, SD √(1/27), t = −(2/9) / (1/9) = −2."""
    ya, xa, yr, xr = (np.array(v, float) for v in ([1, 2, 3], [10] * 3, [1, 1, 2], [10] * 3))
    assert float(score_t(ya, xa, yr, xr, 2.0)) == pytest.approx(-2.0)
    assert float(ratio_p(ya, xa, yr, xr, 2.0, "less")) == pytest.approx(stats.t.sf(2.0, 2))


# Study v3 telecom, int4 against ref on its 30 paired tasks (2 trials each, sums over the
# trials): 422 failed calls against 22, 20 of the 22 in one task.
V3_INT4_FAILED = [12, 10, 24, 11, 26, 10, 20, 21, 20, 20, 11, 14, 0, 10, 20]
V3_INT4_FAILED += [28, 5, 12, 10, 0, 0, 20, 20, 20, 10, 2, 10, 10, 23, 23]
V3_INT4_CALLS = [12, 10, 24, 11, 26, 10, 25, 21, 20, 20, 48, 60, 0, 10, 23]
V3_INT4_CALLS += [29, 53, 36, 10, 0, 0, 20, 20, 20, 10, 2, 10, 10, 23, 23]
V3_REF_FAILED = [0] * 30
V3_REF_FAILED[10], V3_REF_FAILED[11], V3_REF_FAILED[15] = 20, 1, 1
V3_REF_CALLS = [4, 4, 4, 6, 6, 6, 4, 4, 4, 4, 28, 11, 6, 6, 2]
V3_REF_CALLS += [3, 2, 2, 6, 9, 9, 4, 4, 4, 4, 4, 4, 8, 8, 8]


def test_one_task_holding_the_references_failures() -> None:
    """The case the leave-one-task-out jackknife got wrong (×5.83, 95% CI ×0.06 to ×572,
    p = 1 after Holm): the score test weighs the 20-failure task as one task of thirty and
    finds the amplification (p < 0.001); the lower end is above ×2; the data cannot bound
    the ratio from above (one task is all the reference has), so the upper end is +inf
    rather than a number five orders of magnitude away."""
    fa, ca, fr, cr = (
        np.array(v, float) / 2 for v in (V3_INT4_FAILED, V3_INT4_CALLS, V3_REF_FAILED, V3_REF_CALLS)
    )
    arrays = [fa, ca, fr, cr]
    assert sum(V3_INT4_FAILED) == 422 and sum(V3_REF_FAILED) == 22
    t = rate_ratio_test(fa, ca, fr, cr)
    rates = 422 / sum(V3_INT4_CALLS), 22 / sum(V3_REF_CALLS)  # 72.0% and 12.4% of calls
    assert float(t.ratio) == pytest.approx(rates[0] / rates[1], rel=1e-9)
    assert rates == pytest.approx((0.720, 0.124), abs=0.001)
    assert float(t.p_value) < 0.001
    assert 2.0 < float(t.ci_low) < float(t.ratio)
    assert float(t.ci_high) == np.inf
    # With the reference's failures spread over tasks the same counts give a finite interval.
    spread = np.zeros(30)
    spread[:22] = 1 / 2
    finite = rate_ratio_test(arrays[0], arrays[1], spread, arrays[3])
    assert np.log10(float(finite.ci_high) / float(finite.ci_low)) < 1.5


def test_no_test_where_it_does_not_exist() -> None:
    none = rate_ratio_test(np.zeros(3), np.ones(3), np.ones(3), np.ones(3))
    assert np.isnan(none.p_value) and np.isnan(none.ci_low)  # the arm never failed: ratio 0
    new = rate_ratio_test(np.ones(3), np.ones(3), np.zeros(3), np.ones(3))
    assert np.isnan(new.p_value) and np.isnan(new.ratio)  # new in the arm: no ratio
    same = rate_ratio_test(np.ones(4), np.ones(4), np.ones(4), np.ones(4))
    assert same.ratio == 1.0 and same.p_value == 1.0  # identical arms: no evidence at all


def test_a_looping_task_does_not_carry_the_test() -> None:
    """Forty failures in one task of the arm against one in one of the reference's: the
    statistic is normalised by its own per-task spread, so one task gives |t| ≤ about 1."""
    ya, yr = np.zeros(30), np.zeros(30)
    ya[4], yr[9] = 40.0, 1.0
    calls = np.full(30, 20.0)
    t = rate_ratio_test(ya, calls, yr, calls)
    assert float(t.ratio) == pytest.approx(40.0)
    assert float(t.p_value) > 0.3


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(4, 12), scale=st.floats(0.1, 10))
def test_invariants(seed: int, n: int, scale: float) -> None:
    """Swapping the arms inverts the ratio and its interval with the same p; scaling an
    arm's failures and calls together leaves the ratio (the test pools the arms' calls, so
    not its p); task order changes nothing;
    the interval holds the point and agrees with the test (1 outside ⇔ p < 0.05); a task
    identical in both arms (equal calls) pulls the ratio towards 1."""
    rng = np.random.default_rng(seed)
    ya, yr = rng.integers(1, 20, size=(2, n)).astype(float)
    xa, xr = rng.integers(20, 40, size=(2, n)).astype(float)
    t, s = rate_ratio_test(ya, xa, yr, xr), rate_ratio_test(yr, xr, ya, xa)
    assert s.ratio == pytest.approx(1 / t.ratio)
    with np.errstate(divide="ignore"):
        assert float(s.ci_low) == pytest.approx(1 / t.ci_high, rel=1e-5)
        assert float(s.ci_high) == pytest.approx(1 / t.ci_low, rel=1e-5)
    assert s.p_value == pytest.approx(t.p_value)
    r = rate_ratio_test(ya * scale, xa * scale, yr, xr)
    assert float(r.ratio) == pytest.approx(t.ratio)
    perm = rng.permutation(n)
    moved = rate_ratio_test(ya[perm], xa[perm], yr[perm], xr[perm])
    assert float(moved.ratio) == pytest.approx(t.ratio)
    assert float(moved.p_value) == pytest.approx(t.p_value)
    assert (float(t.p_value) < 0.05) == (not t.ci_low <= 1.0 <= t.ci_high)
    assert t.ci_low <= t.ratio <= t.ci_high
    y, x = float(rng.integers(1, 20)), float(rng.integers(20, 40))
    equal = rate_ratio_test(ya, xr, yr, xr)  # equal calls: the ratio is Σ y_a / Σ y_r
    same = rate_ratio_test(np.r_[ya, y], np.r_[xr, x], np.r_[yr, y], np.r_[xr, x])
    assert abs(math.log(float(same.ratio))) <= abs(math.log(float(equal.ratio))) + 1e-12


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(4, 12), margin=st.floats(0.0, 0.2))
def test_bounds_agree_with_their_definitions(seed: int, n: int, margin: float) -> None:
    """The bound's p is twice the smaller of the ratio's and the difference's one-sided p;
    the difference's falls as its margin grows (a larger margin is easier to clear); the
    two one-sided ratio tests at 1 are the two halves of the two-sided one."""
    rng = np.random.default_rng(seed)
    ya, yr = rng.integers(0, 20, size=(2, n)).astype(float)
    xa, xr = rng.integers(20, 40, size=(2, n)).astype(float)
    ya[0] = yr[0] = 1.0
    r = float(ratio_p(ya, xa, yr, xr, 1.25, "less"))
    d = float(difference_p_below(ya, xa, yr, xr, margin))
    assert float(bound_p(ya, xa, yr, xr, 1.25, margin)) == pytest.approx(min(1.0, 2 * min(r, d)))
    assert float(difference_p_below(ya, xa, yr, xr, margin + 0.05)) <= d + 1e-12
    up = float(ratio_p(ya, xa, yr, xr))
    t = rate_ratio_test(ya, xa, yr, xr)
    assert min(up, 1 - up) * 2 == pytest.approx(float(t.p_value))


def test_difference_known_answer() -> None:
    """Equal calls 10 a task: rates 0.2 and 0.1, difference 0.1; per-task influence
    φ_i = (y_ai − 0.2·10)/10 − (y_ri − 0.1·10)/10 = (−0.1, 0, 0.1), SE = √(0.02 / 6)."""
    ya, xa, yr, xr = (np.array(v, float) for v in ([1, 2, 3], [10] * 3, [1, 1, 1], [10] * 3))
    se = math.sqrt(0.02 / 6)
    for margin in (0.05, 0.1, 0.3):
        expected = stats.t.cdf((0.1 - margin) / se, 2)
        assert float(difference_p_below(ya, xa, yr, xr, margin)) == pytest.approx(expected)


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
    return decisions(rate_ratio_test(ya, xa, yr, xr, interval=False), family)


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
    t = rate_ratio_test(ya, xa, yr, xr, interval=False)
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


def test_a_sparse_channel_counts_only_its_informative_tasks() -> None:
    """Five tasks with one failure each in the arm, none in the reference's (which failed
    once elsewhere), 114 tasks: the degrees of freedom are the 6 tasks where either failed,
    less one — not 113 — so five tasks cannot claim the precision of 114 (the exact sign-flip
    p over the 6 informative tasks is 2 / 64 two-sided at best)."""
    ya, yr = np.zeros(114), np.zeros(114)
    ya[:5], yr[7] = 1.0, 1.0
    calls = np.full(114, 10.0)
    assert int(informative_df(ya, yr)) == 5
    t = rate_ratio_test(ya, calls, yr, calls)
    stat = float(score_t(ya, calls, yr, calls))
    assert float(t.p_value) == pytest.approx(2 * stats.t.sf(stat, 5))
    assert float(t.p_value) > 2 / 64


def test_an_interval_narrower_than_the_search_grid_is_found() -> None:
    """An interval between two points of the search grid (log θ = 0 and 0.2), as study v2
    telecom's planted control's all failed calls had (×1.098). The interval is anchored at
    the point, so it is found, not collapsed onto the point; its ends are where t(θ) = ∓q."""
    rng = np.random.default_rng(3)
    ya = rng.poisson(66.3, 114).astype(float)
    yr = rng.poisson(60.0, 114).astype(float)
    calls = np.full(114, 200.0)
    t = rate_ratio_test(ya, calls, yr, calls)
    low, high = float(t.ci_low), float(t.ci_high)
    assert low < float(t.ratio) < high
    assert 0.0 < np.log(low) < np.log(high) < 0.2  # no grid point inside
    q = stats.t.ppf(0.975, int(informative_df(ya, yr)))
    assert float(score_t(ya, calls, yr, calls, low)) == pytest.approx(q, abs=1e-6)
    assert float(score_t(ya, calls, yr, calls, high)) == pytest.approx(-q, abs=1e-6)


def test_every_task_the_same_is_decided() -> None:
    """Every task fails once in 2 calls in the reference and 3 times in 4 in the arm: every
    task's score is the same positive number (no spread), so t = +inf and p = 0; the
    interval is the point."""
    ya, xa, yr, xr = (np.full(60, v) for v in (3.0, 4.0, 1.0, 2.0))
    t = rate_ratio_test(ya, xa, yr, xr)
    assert float(t.ratio) == pytest.approx(1.5) and float(t.p_value) == 0.0
    assert float(t.ci_low) == pytest.approx(1.5) and float(t.ci_high) == pytest.approx(1.5)
