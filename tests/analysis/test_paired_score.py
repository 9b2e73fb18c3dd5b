"""Known answers for the paired score interval, test and TOST."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar
from scipy.stats import norm

from flatscore.analysis.paired_score import (
    discordance,
    score_interval,
    score_test,
    score_tost,
    score_z,
    wilson_interval,
)


def _d(b: int, c: int, n: int) -> np.ndarray:
    return np.array([1.0] * b + [-1.0] * c + [0.0] * (n - b - c))


def zero_bound(n: int, confidence: float = 0.95) -> float:
    """b = c = 0: Z(Δ) = −(nΔ − ½) / sqrt(nΔ(1 − Δ)) = −z, the larger root of
    (n² + z²n)Δ² − (n + z²n)Δ + ¼ = 0."""
    z2 = norm.ppf(0.5 + confidence / 2) ** 2
    a, b = n * n + z2 * n, n + z2 * n
    return float((b + np.sqrt(b * b - a)) / (2 * a))


def test_no_discordant_task_has_the_closed_form_bound() -> None:
    """No discordant task: ±0.60 with 4 tasks, ±0.48 with 6 — never [0, 0]."""
    for n in (4, 6, 30, 114):
        lo, hi = score_interval(np.zeros(n), 0.95)
        assert hi == pytest.approx(zero_bound(n), abs=1e-9)
        assert lo == pytest.approx(-hi, abs=1e-9)
    assert zero_bound(4) == pytest.approx(0.604, abs=1e-3)


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
        want = np.sign(raw) * max(abs(raw) - 0.5, 0) / np.sqrt(var)
        got = score_z(discordance(_d(b, c, n)), delta)
        assert float(got) == pytest.approx(want, rel=1e-5)


def test_score_test_is_mcnemar_with_half_a_step_of_continuity_correction() -> None:
    p = score_test(_d(7, 2, 40))
    assert float(p) == pytest.approx(2 * norm.sf(4.5 / np.sqrt(9)))
    assert float(score_test(np.zeros(5))) == 1.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([-1.0, -0.5, 0.0, 0.25, 0.5, 1.0]), min_size=2, max_size=40))
def test_interval_test_and_tost_agree(d: list[float]) -> None:
    """The interval excludes 0 iff p < 0.05; TOST is equivalent iff the 90% interval is inside
    the margin; the estimate is inside the interval."""
    x = np.array(d)
    lo, hi = score_interval(x, 0.95)
    p = float(score_test(x))
    if abs(p - 0.05) > 1e-6:
        assert (lo > 0 or hi < 0) == (p < 0.05)
    lo90, hi90 = score_interval(x, 0.90)
    tost_p, eq = score_tost(x, 0.075)
    if abs(float(tost_p) - 0.05) > 1e-6:
        assert bool(eq) == (lo90 > -0.075 and hi90 < 0.075)
    assert lo - 1e-9 <= x.mean() <= hi + 1e-9


def test_tost_refuses_an_arm_better_than_the_margin() -> None:
    """An arm 10 points *better* than the reference is not equivalent within ±7.5 — the
    margin is two-sided (a test with only 0 and +0.1 differences cannot see a missing abs)."""
    better = -_d(100, 0, 1000)  # arm solves 100 more tasks of 1,000
    p, eq = score_tost(better, 0.075)
    assert not bool(eq) and float(p) > 0.5
    worse = _d(100, 0, 1000)
    assert not bool(score_tost(worse, 0.075)[1])
    same = _d(10, 10, 1000)
    assert bool(score_tost(same, 0.075)[1])


def test_wilson_interval() -> None:
    lo, hi = wilson_interval(np.array([1.0, 1.0, 1.0, 1.0]))  # (the plain Wilson interval)
    assert hi == 1.0 and lo == pytest.approx(0.5101, abs=1e-3)  # Wilson, 4/4
    assert wilson_interval(np.array([])) == (None, None)
