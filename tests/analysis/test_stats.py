"""The bootstrap and multiple-testing helpers against scipy/statsmodels, and Holm's
family-wise error by simulation (the success interval, test and TOST: test_paired_score.py and
test_coverage.py)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import spearmanr

from flatscore.analysis.invariance import rowwise_spearman, spearman_rho
from flatscore.analysis.paired_score import paired_test
from flatscore.analysis.stats import adjust_pvalues, percentile_ci, resample_counts, stable_rng


def test_holm_and_bh_match_hand_computation() -> None:
    p = [0.01, 0.04, 0.03, 0.2]
    # Holm: sorted 0.01, 0.03, 0.04, 0.2 times 4, 3, 2, 1, running max, capped at 1.
    holm_sorted = np.maximum.accumulate([0.04, 0.09, 0.08, 0.2])
    assert adjust_pvalues(p, "holm") == pytest.approx(
        [holm_sorted[0], holm_sorted[2], holm_sorted[1], holm_sorted[3]]
    )
    # BH: p·m/rank = 0.04, 0.06, 0.0533, 0.2 for ranks 1..4, then a running min from the top.
    assert adjust_pvalues(p, "bh") == pytest.approx([0.04, 0.04 * 4 / 3, 0.04 * 4 / 3, 0.2])
    assert adjust_pvalues([], "holm") == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=1, max_size=40))
def test_holm_matches_statsmodels(pvalues: list[float]) -> None:
    from unittest import mock

    from statsmodels.stats.multitest import multipletests

    with mock.patch("gc.collect", return_value=0):  # statsmodels' Holm collects every call
        expected = multipletests(pvalues, method="holm")[1]
    assert adjust_pvalues(pvalues, "holm") == pytest.approx(list(expected), abs=1e-12)


def test_unknown_correction_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown correction"):
        adjust_pvalues([0.1], "bonferroni")


def test_rowwise_spearman_matches_scipy_over_each_rows_union() -> None:
    rng = np.random.default_rng(2)
    a = rng.integers(0, 5, (50, 8)).astype(float)
    b = a + rng.integers(0, 3, (50, 8))
    got = rowwise_spearman(a, b)
    for i in range(50):
        present = (a[i] != 0) | (b[i] != 0)
        want = spearmanr(a[i][present], b[i][present]).statistic
        if np.isnan(want):
            assert np.isnan(got[i])
        else:
            assert got[i] == pytest.approx(want)


def test_rowwise_spearman_leaves_out_names_absent_from_the_row() -> None:
    # Reversed counts on the 3 names present: ρ = -1. Ranking the two absent names as tied
    # (0, 0) pairs (the old bootstrap) gave +11/19 here instead: ranks [5,4,3,1.5,1.5] and
    # [3,4,5,1.5,1.5], covariance 5.5 over variance 9.5.
    a = np.array([[3.0, 2.0, 1.0, 0.0, 0.0]])
    b = np.array([[1.0, 2.0, 3.0, 0.0, 0.0]])
    assert rowwise_spearman(a, b)[0] == pytest.approx(-1.0)
    assert spearmanr(a[0], b[0]).statistic == pytest.approx(11 / 19)
    # Fewer than 2 names present, or constant counts: undefined.
    assert np.isnan(rowwise_spearman(np.array([[0.0, 4.0, 0.0]]), np.array([[0.0, 1.0, 0.0]])))[0]
    assert np.isnan(rowwise_spearman(np.array([[2.0, 2.0]]), np.array([[1.0, 3.0]])))[0]


counts_strategy = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=0, max_size=12)


@settings(max_examples=200, deadline=None)
@given(counts_strategy)
def test_rowwise_spearman_is_the_point_estimate(pairs: list[tuple[int, int]]) -> None:
    """One bootstrap row holding the full sample's counts equals the reported ρ, zero-count
    names and all: the interval and the point estimate have one estimand."""
    ref = Counter({f"n{i}": r for i, (r, _) in enumerate(pairs) if r})
    arm = Counter({f"n{i}": a for i, (_, a) in enumerate(pairs) if a})
    point, _ = spearman_rho(ref, arm)
    a = np.array([[float(r) for r, _ in pairs] + [0.0, 0.0]])
    b = np.array([[float(x) for _, x in pairs] + [0.0, 0.0]])
    row = rowwise_spearman(a, b)[0]
    if point is None:
        assert np.isnan(row)
    else:
        assert row == pytest.approx(point)


def test_resample_counts_and_seeds() -> None:
    w = resample_counts(7, 100, stable_rng(0, "m", "d"))
    assert w.shape == (100, 7) and np.all(w.sum(axis=1) == 7)
    assert np.array_equal(w, resample_counts(7, 100, stable_rng(0, "m", "d")))
    assert not np.array_equal(w, resample_counts(7, 100, stable_rng(0, "m", "other")))


def test_percentile_ci() -> None:
    x = np.arange(1001, dtype=float)
    assert percentile_ci(x) == pytest.approx((25.0, 975.0))
    assert percentile_ci(np.array([np.nan, np.nan])) == (None, None)
    lo, hi = percentile_ci(np.array([1.0, 2.0, np.inf, np.inf, np.inf] * 20))
    assert lo == 1.0 and hi is None


def test_holm_controls_familywise_error_by_simulation() -> None:
    """Five null comparisons per study (114 tasks, one trial): Holm-adjusted rejections in
    ≤ ~5% of 400 studies, while raw p-values reject somewhere far more often."""
    rng = np.random.default_rng(5)
    any_raw = any_holm = 0
    for _ in range(400):
        ps = []
        for _ in range(5):
            p = rng.uniform(0.2, 0.8, 114)
            ref = (rng.random(114) < p).astype(float)
            arm = (rng.random(114) < p).astype(float)
            ps.append(float(paired_test(ref - arm)))
        any_raw += min(ps) < 0.05
        any_holm += min(adjust_pvalues(ps, "holm")) < 0.05
    assert any_holm / 400 <= 0.07
    assert any_raw / 400 > 0.1
