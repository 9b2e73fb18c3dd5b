"""Known answers for the exact yardsticks of the coverage simulation (flatscore.analysis.
exact_paired): the exact unconditional interval covers ≥ 95% for every truth (computed
exactly, by enumerating every outcome), and the sign-flip p-value is the enumeration of all
2ⁿ sign patterns."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import xlogy

from exact_paired import (
    ExactUnconditional,
    differences,
    exact_unconditional_intervals,
    sign_flip_intervals,
    sign_flip_p,
)
from flatscore.analysis.paired_score import score_interval


def test_exact_unconditional_coverage_is_at_least_nominal_for_every_truth() -> None:
    """n = 12 paired binary outcomes: the probability, over all 91 outcomes (b, c), that the
    interval holds the true p₁₀ − p₀₁, on a grid of (p₁₀, p₀₁), exactly — never below 95%.
    Tango's asymptotic interval, for contrast, drops below it."""
    n = 12
    test = ExactUnconditional(n)
    lo, hi = test.intervals(test.b, test.c)
    outcomes = zip(test.b.astype(int), test.c.astype(int), strict=True)
    t_lo, t_hi = score_interval(np.stack([differences(b, c, n) for b, c in outcomes]))
    worst, worst_tango = 1.0, 1.0
    for p10, p01 in itertools.product(np.linspace(0.0, 0.5, 11), repeat=2):
        prob = np.exp(test.log_coef + xlogy(test.b, p10) + xlogy(test.c, p01))
        prob *= np.exp(xlogy(test.rest, 1.0 - p10 - p01))
        truth = p10 - p01
        worst = min(worst, float(prob[(lo <= truth + 1e-12) & (truth - 1e-12 <= hi)].sum()))
        held = (t_lo <= truth + 1e-12) & (truth - 1e-12 <= t_hi)
        worst_tango = min(worst_tango, float(prob[held].sum()))
    assert worst >= 0.95
    assert worst_tango < 0.95


def test_exact_unconditional_interval_known_values() -> None:
    """Hand-checked ends: no discordant task of 30 is symmetric around 0 and a little wider
    than Tango's ±z²/(n + z²) = ±11.4 points; one task of 30 won by the reference."""
    lo, hi = exact_unconditional_intervals(np.stack([differences(0, 0, 30), differences(1, 0, 30)]))
    assert lo[0] == pytest.approx(-hi[0], abs=1e-6)
    assert hi[0] == pytest.approx(0.1176, abs=5e-4)
    assert (lo[1], hi[1]) == pytest.approx((-0.0789, 0.1731), abs=5e-4)
    with pytest.raises(ValueError, match="one trial"):
        exact_unconditional_intervals(np.array([[0.5, 0.0]]))


def test_sign_flip_p_is_the_enumeration_of_every_sign_pattern() -> None:
    rng = np.random.default_rng(1)
    for _ in range(25):
        n = int(rng.integers(3, 9))
        d = rng.choice([-1.0, -0.5, 0.0, 0.0, 0.25, 0.5, 1.0], n)
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))
        u, k = np.unique(d, return_counts=True)
        for delta in (-0.3, 0.0, 0.1, 0.25, 0.6):
            flipped, observed = np.abs(signs @ (d - delta)), abs((d - delta).sum())
            p = (flipped >= observed - 1e-9).mean()
            mid = p - 0.5 * (np.abs(flipped - observed) < 1e-9).mean()
            assert sign_flip_p(u, k, np.array([delta]))[0] == pytest.approx(p, abs=1e-12)
            assert sign_flip_p(u, k, np.array([delta]), mid_p=True)[0] == pytest.approx(
                mid, abs=1e-12
            )


def test_sign_flip_interval_of_six_discordant_tasks_excludes_zero() -> None:
    """Six tasks all won by the reference: p(0) = 2/64 < 0.05, so 0 is outside."""
    lo, hi = sign_flip_intervals(differences(6, 0, 6)[None])
    assert lo[0] > 0 and hi[0] == 1.0
