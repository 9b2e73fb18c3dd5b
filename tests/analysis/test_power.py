from __future__ import annotations

import pytest
from scipy.stats import binom

from flatscore.analysis.power import power_analysis, simulated_power, true_gap


def test_true_gap_by_hand() -> None:
    # 10 calls, rate 0.1 vs 0.2, K = 2, success 0.6.
    want = 0.6 * (binom.cdf(2, 10, 0.1) - binom.cdf(2, 10, 0.2))
    assert true_gap(0.6, 0.1, 2.0, 10, 2) == pytest.approx(want)
    assert true_gap(0.6, 0.1, 1.0, 10, 2) == 0.0


def test_power_grows_with_amplification_and_size() -> None:
    import numpy as np

    def pw(m: float, tasks: int) -> float:
        rng = np.random.default_rng(0)
        return simulated_power(
            0.6, 0.1, m, tasks=tasks, trials=1, calls=10, k=2, simulations=300, alpha=0.05, rng=rng
        )

    assert pw(1.0, 114) <= 0.06  # no amplification: about alpha / 2 (a drop, one side)
    assert pw(3.0, 114) > pw(1.5, 114)
    assert pw(1.5, 400) > pw(1.5, 50)


def test_power_analysis_finds_a_detectable_gap() -> None:
    r = power_analysis(
        0.6, {"unknown_tool": 0.08, "bad_arguments": 0.02}, tasks=114, k=2, simulations=200
    )
    assert r.detectable_gap is not None and 0 < r.detectable_gap < 0.6
    hit = next(row for row in r.rows if row.gap == r.detectable_gap)
    assert hit.power >= 0.8
    assert all(row.power < 0.8 for row in r.rows if row.multiplier < hit.multiplier)
    assert [row.multiplier for row in r.rows] == sorted(row.multiplier for row in r.rows)
    small = power_analysis(0.6, {"unknown_tool": 0.1}, tasks=20, k=2, simulations=200)
    assert small.detectable_gap is None or small.detectable_gap >= r.detectable_gap
    r4 = power_analysis(0.6, {"unknown_tool": 0.1}, tasks=30, trials=3, k=2, simulations=60, grid=6)
    assert r4.rows  # several trials


def test_power_rejects_bad_inputs() -> None:
    with pytest.raises(ValueError):
        power_analysis(1.5, {"x": 0.1}, tasks=10)
    with pytest.raises(ValueError):
        power_analysis(0.5, {"x": 0.0}, tasks=10)


def test_power_uses_the_test_analyze_uses() -> None:
    """`flatscore power` sizes a study for the paired test `flatscore analyze` applies (one
    statistic, so a study sized here is not judged by another test there)."""
    import numpy as np

    from flatscore.analysis import comparison, power
    from flatscore.analysis.paired_score import paired_test

    assert power.paired_test is comparison.paired_test is paired_test
    rng = np.random.default_rng(5)
    null = simulated_power(
        0.6, 0.1, 1.0, tasks=114, trials=4, calls=10, k=2, simulations=400, alpha=0.05, rng=rng
    )
    assert null <= 0.045  # one-sided share of a two-sided 5% test, plus noise
