"""Known answers for the success-difference interval, paired test and TOST (the
nonparametric score statistic on per-task differences, Tango's score interval with few
discordant tasks)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize, minimize_scalar
from scipy.stats import norm
from scipy.stats import t as student_t

from exact_paired import differences
from flatscore.analysis.paired_score import (
    DISCORDANT_MIN,
    discordance,
    el_score_z,
    paired_interval,
    paired_test,
    paired_tost,
    score_interval,
    score_test,
    score_tost,
    score_z,
    sign_flip_p,
    uses_el,
    wilson_interval,
)


def zero_bound(n: int, confidence: float = 0.95) -> float:
    """b = c = 0: Z(Δ) = −nΔ / sqrt(nΔ(1 − Δ)) = −z, i.e. Δ = z² / (n + z²) (the Wilson
    bound for 0 of n)."""
    z2 = norm.ppf(0.5 + confidence / 2) ** 2
    return float(z2 / (n + z2))


def test_no_discordant_task_has_the_closed_form_bound() -> None:
    """No discordant task: ±49 points with 4 tasks, ±39 with 6 — never [0, 0]."""
    for n in (4, 6, 30, 114):
        for interval in (score_interval, paired_interval):
            lo, hi = interval(np.zeros(n), 0.95)
            assert hi == pytest.approx(zero_bound(n), abs=1e-9)
            assert lo == pytest.approx(-hi, abs=1e-9)
    assert zero_bound(4) == pytest.approx(0.490, abs=1e-3)


def restricted_z(d: np.ndarray, delta: float) -> float:
    """Z(Δ) from first principles: maximise Σ log p over distributions p on the observed
    values with mean Δ (scipy's SLSQP), then (mean − Δ)·√n / sqrt(Σ p (v − Δ)²)."""
    values, counts = np.unique(d, return_counts=True)

    def nll(p: np.ndarray) -> float:
        return float(-(counts * np.log(np.maximum(p, 1e-300))).sum())

    constraints = [
        {"type": "eq", "fun": lambda p: p.sum() - 1.0},
        {"type": "eq", "fun": lambda p: (p * values).sum() - delta},
    ]
    start = np.full(values.size, 1.0 / values.size)
    p = minimize(
        nll,
        start,
        method="SLSQP",
        bounds=[(1e-12, 1.0)] * values.size,
        constraints=constraints,
        options={"ftol": 1e-15, "maxiter": 1000},
    ).x
    sd = np.sqrt((p * (values - delta) ** 2).sum())
    return float((d.mean() - delta) * np.sqrt(d.size) / sd)


def test_el_score_statistic_with_enough_discordant_tasks() -> None:
    """Six or more discordant tasks with some spread: Z(Δ) with the variance of the
    restricted maximum-likelihood distribution (known answer by numerical optimisation),
    t(n − 1) for p-values and the interval's ends; TOST = the two one-sided tests."""
    d = np.array([1, 1, 0.5, 0.25, 0, 0, 0.75, -0.25, 0, 0, 0.5, 0])
    assert bool(uses_el(d))
    n = d.size
    for delta in (-0.2, 0.0, 0.2, 0.5):
        assert float(el_score_z(d, delta)[0]) == pytest.approx(restricted_z(d, delta), rel=1e-5)
    # No distribution on the observed values has a mean beyond them: Z = ±inf there.
    assert float(el_score_z(d, -0.3)[0]) == np.inf and float(el_score_z(d, 1.0)[0]) == -np.inf
    assert float(paired_test(d)) == pytest.approx(2 * student_t.sf(restricted_z(d, 0.0), n - 1))
    lo, hi = paired_interval(d, 0.95)
    q = student_t.ppf(0.975, n - 1)
    assert restricted_z(d, float(lo)) == pytest.approx(q, rel=1e-5)
    assert restricted_z(d, float(hi)) == pytest.approx(-q, rel=1e-5)
    # Not the t-interval: skewed differences give an interval skewed the same way.
    mean, se = d.mean(), d.std(ddof=1) / np.sqrt(n)
    t_lo, t_hi = mean - student_t.ppf(0.975, n - 1) * se, mean + student_t.ppf(0.975, n - 1) * se
    assert hi - mean > t_hi - mean and mean - lo < mean - t_lo
    p, _ = paired_tost(d, 0.3)
    p_low = 0.0  # −0.3 is below every difference
    p_high = student_t.cdf(restricted_z(d, 0.3), n - 1)
    assert float(p) == pytest.approx(max(p_low, p_high), rel=1e-5)


def test_el_score_statistic_is_tangos_on_single_trials() -> None:
    """With one trial per task and both kinds of discordant task present, the restricted
    maximum likelihood on the observed values is Tango's trinomial one: the same Z(Δ)."""
    d = differences(7, 3, 40)
    for delta in (-0.2, 0.0, 0.05, 0.3):
        assert float(el_score_z(d, delta)[0]) == pytest.approx(
            float(score_z(discordance(d), delta)), rel=1e-9
        )


def test_few_discordant_or_equal_differences_use_the_score_statistic() -> None:
    """Five discordant tasks, or differences all equal (no spread to estimate), are the
    score interval's: a t-interval would be [1, 1] for six tasks at 1.0."""
    few = differences(DISCORDANT_MIN - 1, 0, 40)
    equal = np.ones(DISCORDANT_MIN)
    for d in (few, equal):
        assert not bool(uses_el(d))
        assert np.allclose(paired_interval(d), score_interval(d))
        assert float(paired_test(d)) == float(score_test(d))
        assert np.allclose(paired_tost(d, 0.075)[0], score_tost(d, 0.075)[0])
    lo, hi = paired_interval(equal)
    assert hi == 1.0 and 0.0 < lo < 1.0  # six of six: a drop, bounded well below 1


def test_restricted_mle_matches_a_numerical_maximum() -> None:
    """Tango's closed-form p̂21(Δ) maximises the multinomial likelihood under p12 − p21 = Δ."""
    b, c, n = 5, 2, 20
    for delta in (-0.3, 0.0, 0.1, 0.4):

        def nll(p21: float, delta: float = delta) -> float:
            p12 = p21 + delta
            rest = 1 - p12 - p21
            return -(b * np.log(p12) + c * np.log(p21) + (n - b - c) * np.log(rest))

        lo = max(0.0, -delta) + 1e-9
        hi = (1 - delta) / 2 - 1e-9
        p21 = minimize_scalar(nll, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12}).x
        var = n * (2 * p21 + delta * (1 - delta))
        raw = b - c - n * delta
        want = raw / np.sqrt(var)
        got = score_z(discordance(differences(b, c, n)), delta)
        assert float(got) == pytest.approx(want, rel=1e-5)


def test_one_signed_discordance_gets_the_exact_sign_flip_p() -> None:
    """Every discordant task of one sign puts Δ = 0 at the edge of the differences' range,
    where the score statistic is infinite: the p is the exact sign-flip one, 2^(1 − k), not
    0 (six one-signed tasks: 1/32), whatever the sign or the trials' fractions."""
    assert float(paired_test(differences(6, 0, 12))) == pytest.approx(2**-5)
    assert float(paired_test(differences(8, 0, 40))) == pytest.approx(2**-7)
    assert float(paired_test(differences(0, 7, 20))) == pytest.approx(2**-6)
    trials = np.array([1.0, 0.5, 0.25, 0.25, 0.5, 0.75, 0.0, 0.0])
    assert float(paired_test(trials)) == pytest.approx(2**-5)
    mixed = differences(7, 1, 20)  # both signs: the score statistic's own p, unchanged
    assert np.isnan(sign_flip_p(mixed)) and 0 < float(paired_test(mixed)) < 0.05
    both = np.stack([differences(6, 0, 12), differences(3, 3, 12)])  # vectorised over studies
    assert np.allclose(paired_test(both), [2**-5, float(paired_test(differences(3, 3, 12)))])


def test_holm_over_null_comparisons_keeps_its_level_on_small_studies() -> None:
    """Four null comparisons (each task discordant with probability 0.7, either sign) of 9
    tasks, Holm at 0.05: the family-wise error stays at or below 5% (the score statistic's
    p = 0 on one-signed studies put it at 5.7% here: a six-task one-signed study, 3% likely,
    survived any correction), and each test alone still rejects at its unadjusted rate."""
    from flatscore.analysis.stats import holm

    rng = np.random.default_rng(0)
    studies, m, n = 4000, 4, 9
    d = (rng.random((studies * m, n)) < 0.7) * np.where(rng.random((studies * m, n)) < 0.5, 1, -1)
    p = paired_test(d.astype(np.float64)).reshape(studies, m)
    family = np.array([min(holm(row)) < 0.05 for row in p])
    assert family.mean() <= 0.05
    assert 0.02 < (p < 0.05).mean() < 0.05  # valid, not empty: the unadjusted test still fires


def test_score_test_is_mcnemar() -> None:
    p = score_test(differences(7, 2, 40))
    assert float(p) == pytest.approx(2 * norm.sf(5 / np.sqrt(9)))
    assert float(score_test(np.zeros(5))) == 1.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([-1.0, -0.5, 0.0, 0.25, 0.5, 1.0]), min_size=2, max_size=40))
def test_interval_test_and_tost_agree(d: list[float]) -> None:
    """The interval excludes 0 iff p < 0.05; TOST is equivalent iff the 90% interval is inside
    the margin; the estimate is inside the interval (whichever statistic the data select)."""
    x = np.array(d)
    lo, hi = paired_interval(x, 0.95)
    p = float(paired_test(x))
    if abs(p - 0.05) > 1e-6:
        assert (lo > 0 or hi < 0) == (p < 0.05)
    lo90, hi90 = paired_interval(x, 0.90)
    tost_p, eq = paired_tost(x, 0.075)
    if abs(float(tost_p) - 0.05) > 1e-6:
        assert bool(eq) == (lo90 > -0.075 and hi90 < 0.075)
    assert lo - 1e-9 <= x.mean() <= hi + 1e-9


def test_tost_refuses_an_arm_better_than_the_margin() -> None:
    """An arm 10 points *better* than the reference is not equivalent within ±7.5 — the
    margin is two-sided (a test with only 0 and +0.1 differences cannot see a missing abs)."""
    better = -differences(100, 0, 1000)  # arm solves 100 more tasks of 1,000
    p, eq = paired_tost(better, 0.075)
    assert not bool(eq) and float(p) > 0.5
    worse = differences(100, 0, 1000)
    assert not bool(paired_tost(worse, 0.075)[1])
    same = differences(10, 10, 1000)
    assert bool(paired_tost(same, 0.075)[1])


def test_wilson_interval() -> None:
    lo, hi = wilson_interval(np.array([1.0, 1.0, 1.0, 1.0]))  # (the plain Wilson interval)
    assert hi == 1.0 and lo == pytest.approx(0.5101, abs=1e-3)  # Wilson, 4/4
    assert wilson_interval(np.array([])) == (None, None)
