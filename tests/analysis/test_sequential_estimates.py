"""The gap after a stop (`analysis.sequential_estimates`): with one look the repeated
confidence interval is the fixed design's 95% interval; with several its ends are where the
paired one-sided tests meet the look's boundary; and among simulated studies stopped early
for damage it holds the true gap, where the fixed interval on the same tasks does not."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from flatscore.analysis.paired_score import paired_interval, paired_one_sided, uses_el
from flatscore.analysis.sequential import SequentialDesign, decide, look_stats
from flatscore.analysis.sequential_estimates import look_boundaries, repeated_intervals
from sequential_model import simulate

DESIGN = SequentialDesign()


def _differences(seed: int, studies: int, tasks: int) -> np.ndarray:
    """Simulated per-task differences (114 × 2 trials' model) with some sparse studies, so
    both of the fixed design's statistics (empirical likelihood and Tango's) are used."""
    rng = np.random.default_rng(seed)
    d = simulate(rng, studies, gap=0.05, coupling=0.75, tasks=tasks, trials=2).differences
    sparse = np.zeros((4, tasks))
    sparse[0, :3], sparse[1, :2], sparse[1, 2] = 1.0, 0.5, -0.5
    sparse[2, :5] = 0.5
    return np.concatenate([d, sparse])


@pytest.mark.parametrize(
    ("design", "tasks"),
    [(SequentialDesign(first_look=200), 114), (SequentialDesign(look_every=40), 36)],
    ids=["first look set past the maximum", "maximum below the first look"],
)
def test_one_look_gives_the_fixed_designs_interval(design: SequentialDesign, tasks: int) -> None:
    assert design.looks(tasks) == [tasks]
    d = _differences(3, 40, tasks)
    assert uses_el(d).any() and not uses_el(d).all()
    r = repeated_intervals(d, np.zeros(len(d), int), [tasks], tasks, design)
    low, high = paired_interval(d, 0.95)
    assert r.nominal == pytest.approx(np.full(len(d), 0.95), abs=1e-9)
    assert r.low == pytest.approx(low, abs=1e-7) and r.high == pytest.approx(high, abs=1e-7)
    assert r.estimate == pytest.approx(d.mean(axis=-1)) and (r.tasks == tasks).all()


def test_the_ends_are_where_the_one_sided_tests_meet_the_looks_boundary() -> None:
    """At each end the test on that side rejects just outside and not just inside, at the
    boundary of the look (Z = Φ⁻¹(1 − p) against c_k, as the sequential looks read p)."""
    counts = DESIGN.looks(114)
    d = _differences(5, 12, 114)[:12]
    look = np.arange(12) % len(counts)
    r = repeated_intervals(d, look, counts, 114, DESIGN)
    c = look_boundaries(114, DESIGN)
    assert (r.high - r.low > paired_interval(d, 0.95)[1] - paired_interval(d, 0.95)[0]).any()
    for i in range(len(d)):
        head, ck = d[i, : counts[look[i]]], c[look[i]]
        assert r.tasks[i] == counts[look[i]] and r.nominal[i] == pytest.approx(1 - 2 * norm.sf(ck))

        def z(delta: float, upper: bool, head: np.ndarray = head) -> float:
            return float(norm.isf(paired_one_sided(head, delta, upper=upper)))

        eps = 1e-6
        assert z(r.low[i] - eps, True) >= ck > z(r.low[i] + eps, True), i
        assert z(r.high[i] + eps, False) >= ck > z(r.high[i] - eps, False), i


def test_zero_stays_in_while_the_exact_sign_test_there_does_not_reject() -> None:
    """Differences all of one sign: the tests use the exact sign-flip p at 0 (2^−k, one
    side), which at an early look's boundary needs more discordant tasks than the score
    statistic's interval end suggests."""
    counts = DESIGN.looks(114)
    level = norm.sf(look_boundaries(114, DESIGN)[0])
    head = np.zeros((2, counts[0]))
    head[0, :7] = 1.0  # 2^-7 = 0.0078 > the first look's level 0.0027: 0 not rejected
    head[1, :10] = 1.0  # 2^-10 = 0.00098 < 0.0027: rejected
    assert 2.0**-7 > level > 2.0**-10
    r = repeated_intervals(head, np.zeros(2, int), counts, 114, DESIGN)
    score_low = paired_interval(head, float(r.nominal[0]))[0]
    assert (score_low > 0).all()  # the statistic alone would leave 0 out of both
    assert r.low[0] == 0.0 and r.low[1] == pytest.approx(score_low[1])


def test_among_studies_stopped_early_for_damage_it_holds_the_true_gap() -> None:
    """400 studies of 114 tasks × 2 independent trials with a true gap of 7.5 points (the
    margin), decided by the whole sequential procedure: those stopped early for damage
    overstate the gap, and the fixed 95% interval on their tasks covers it too rarely; the
    repeated interval covers it at least as often as its level allows."""
    gap = 0.075
    sim = simulate(np.random.default_rng(63), 400, gap=gap, trials=2)
    stats = look_stats(*sim.arrays(), DESIGN)
    decisions = decide([stats], DESIGN)
    look, verdict = decisions.look[:, 0], decisions.verdict[:, 0]
    early = (verdict == 1) & (look < len(stats.counts) - 1)
    assert early.sum() >= 80, early.sum()
    r = repeated_intervals(sim.differences, look, stats.counts, 114, DESIGN)
    covered = (r.low <= gap) & (gap <= r.high)
    naive = np.zeros(len(look), dtype=bool)
    for k in np.unique(look):
        rows = look == k
        low, high = paired_interval(sim.differences[rows, : stats.counts[k]], 0.95)
        naive[rows] = (low <= gap) & (gap <= high)
    assert r.estimate[early].mean() > gap + 0.03  # the stop chose a sample with a large gap
    assert naive[early].mean() < 0.93, naive[early].mean()
    assert covered[early].mean() >= 0.93, covered[early].mean()
    assert covered[early].mean() > naive[early].mean()
