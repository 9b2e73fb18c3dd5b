"""Group-sequential boundaries (`analysis.spending`) against published values and an
independent computation of the crossing probability (scipy's multivariate normal)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import multivariate_normal, norm

from flatscore.analysis.spending import (
    boundaries_for,
    crossing_probability,
    hsd,
    hsd_boundaries,
    lan_demets_obf,
)


def test_lan_demets_obrien_fleming_five_looks() -> None:
    """Five equally spaced looks, one-sided α = 0.025, Lan–DeMets O'Brien–Fleming spending:
    4.8769, 3.3569, 2.6803, 2.2898, 2.0310 (Jennison & Turnbull 2000, the two-sided α = 0.05
    design's upper boundary; gsDesign's sfLDOF)."""
    b = boundaries_for(np.arange(1, 6) / 5, 0.025, lan_demets_obf)
    assert b == pytest.approx([4.8769, 3.3569, 2.6803, 2.2898, 2.0310], abs=2e-4)


def test_hwang_shih_decani_three_looks() -> None:
    """gsDesign's default one-sided design (k = 3, α = 0.025, HSD γ = −4): 3.0107, 2.5465,
    1.9992."""
    b = boundaries_for([1 / 3, 2 / 3, 1.0], 0.025, hsd(-4.0))
    assert b == pytest.approx([3.0107, 2.5465, 1.9992], abs=2e-4)


def test_one_look_is_the_fixed_design() -> None:
    assert boundaries_for([1.0], 0.05, hsd(-2.0))[0] == pytest.approx(norm.isf(0.05))


def test_linear_spending_is_gamma_zero() -> None:
    t = np.array([0.25, 0.5, 1.0])
    assert hsd(0.0)(t, 0.05) == pytest.approx(0.05 * t)
    assert hsd(1e-9)(t, 0.05) == pytest.approx(0.05 * t, rel=1e-6)


def test_crossing_probability_matches_the_multivariate_normal() -> None:
    """Unequal looks (the last two close, as at 112 and 114 of 114 tasks): the recursion's
    boundaries cross with total probability α, by scipy's multivariate normal CDF
    (corr(Z_j, Z_k) = √(t_j / t_k))."""
    t = np.array([8, 40, 72, 112, 114]) / 114
    for gamma, alpha in ((-2.0, 0.025), (-4.5, 0.05)):
        b = boundaries_for(t, alpha, hsd(gamma))
        cov = np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))
        never = multivariate_normal(mean=np.zeros(t.size), cov=cov).cdf(b)
        assert 1 - never == pytest.approx(alpha, abs=2e-4)
        assert crossing_probability(t, b) == pytest.approx(alpha, abs=1e-6)


def test_a_look_that_spends_nothing_cannot_reject() -> None:
    b = boundaries_for([0.5, 1.0], 0.05, lambda t, a: np.where(t < 1, 0.0, a))
    assert b[0] == np.inf
    assert b[1] == pytest.approx(norm.isf(0.05))


def test_bad_looks_are_refused() -> None:
    for looks in ([0.5, 0.5], [0.0, 1.0], [0.5, 1.2], []):
        with pytest.raises(ValueError):
            boundaries_for(looks, 0.05, hsd(-2))


@settings(max_examples=15, deadline=None)
@given(
    st.lists(st.integers(1, 113), min_size=1, max_size=8, unique=True),
    st.sampled_from([-4.5, -2.0, 0.0, 1.0]),
    st.sampled_from([0.0125, 0.025, 0.05]),
)
def test_boundaries_spend_exactly_alpha(counts: list[int], gamma: float, alpha: float) -> None:
    """Any looks ending at the maximum: total crossing probability α (the last look spends
    what is left), and each boundary at least the fixed design's critical value."""
    t = tuple(sorted({c / 114 for c in counts} | {1.0}))
    b = hsd_boundaries(t, alpha, gamma)
    assert crossing_probability(t, b) == pytest.approx(alpha, abs=1e-6)
    assert np.all(b[:-1] >= norm.isf(alpha) - 1e-9)
