"""Sequential verdicts (`analysis.sequential`): known answers for the look statistics and
the decision rules, Holm's sequential form, and the seeded simulation of issue 47's
"done when" (114 tasks × 4 trials, independent and coupled trials, 2,000 studies per
condition; model: tests/sequential_model.py). The measured numbers are in docs/analysis.md
("Sequential verdicts"); `python tests/analysis/test_sequential.py` prints them."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import pytest
from scipy.stats import binomtest, norm
from scipy.stats import t as student_t

from flatscore.analysis.paired_score import paired_one_sided, paired_test, paired_tost
from flatscore.analysis.rate_ratio import (
    bound_p,
    informative_df,
    rate_ratio_test,
    ratio_p,
    score_t,
)
from flatscore.analysis.sequential import (
    VERDICTS,
    LookStats,
    SequentialDesign,
    boundaries,
    decide,
    look_counts,
    look_stats,
)
from sequential_model import CONCENTRATION, COUPLINGS, PLANTED, RULES, simulate
from sequential_model import crossing_stats as _stats
from sequential_model import rule_verdicts as _verdict

DESIGN = SequentialDesign()
STUDIES = 2000
SMALL_STUDIES = 200
TASKS = 114
PROFILES = (0.6, 0.9, 0.5)
"""Mean success at the default budget; each a Beta(c·s, c·(1 − s)) of task solve
probabilities, c = 4 but for the last."""
HETEROGENEOUS = 0.5
CONCENTRATIONS = {HETEROGENEOUS: 1.8}
"""s = 0.5 with c = 1.8 is Beta(0.9, 0.9): most tasks nearly always or nearly never solved,
strong task heterogeneity as in the committed studies."""


# --- the building blocks ------------------------------------------------------------------


def test_look_counts() -> None:
    assert look_counts(114, 8) == [*range(8, 113, 8), 114]
    assert look_counts(16, 8) == [8, 16]
    assert look_counts(5, 8) == [5]
    assert look_counts(0, 8) == []
    assert look_counts(114, 6, 30) == [*range(30, 113, 6), 114]


def test_the_designs_looks() -> None:
    """Every 6 tasks from the first multiple of 6 at or above a quarter of the maximum."""
    assert DESIGN.looks(114) == [30, 36, 42, 48, 54, 60, 66, 72, 78, 84, 90, 96, 102, 108, 114]
    assert DESIGN.looks(40) == [12, 18, 24, 30, 36, 40]
    assert DESIGN.looks(16) == [6, 12, 16]
    assert DESIGN.looks(5) == [5]
    assert RULES.looks(32) == [8, 16, 24, 32]


def test_one_sided_p_values_are_the_fixed_designs_halves() -> None:
    """TOST's p is the larger of the two one-sided p's; the two-sided paired test is twice
    the smaller one-sided p (both on the same statistic)."""
    rng = np.random.default_rng(3)
    d = simulate(rng, 200, gap=0.05, coupling=0.75).differences
    tost_p = paired_tost(d, 0.075)[0]
    low = paired_one_sided(d, -0.075, upper=True)
    high = paired_one_sided(d, 0.075, upper=False)
    assert np.maximum(low, high) == pytest.approx(tost_p)
    up, down = paired_one_sided(d, 0.0, upper=True), paired_one_sided(d, 0.0, upper=False)
    assert 2 * np.minimum(up, down) == pytest.approx(paired_test(d), rel=1e-9)


def test_one_signed_differences_get_the_exact_sign_flip_p() -> None:
    """Six discordant tasks, all drops: one-sided p = 2⁻⁶ (the score statistic would say 0)."""
    d = np.array([1.0, 0.5, 0.25, 0.25, 0.75, 1.0] + [0.0] * 10)
    assert float(paired_one_sided(d, 0.0, upper=True)) == pytest.approx(2.0**-6)
    assert float(paired_one_sided(d, 0.0, upper=False)) == pytest.approx(1.0)


def test_ratio_tests_are_the_fixed_designs_halves() -> None:
    rng = np.random.default_rng(5)
    c = simulate(rng, 50, ratio=1.3)
    arrays = (c.failed_arm, c.calls_arm, c.failed_ref, c.calls_ref)
    fixed = rate_ratio_test(*arrays, interval=False)
    up = ratio_p(*arrays)
    assert 2 * np.minimum(up, 1 - up) == pytest.approx(fixed.p_value)
    t = score_t(*arrays)
    df = informative_df(c.failed_arm, c.failed_ref)
    assert up == pytest.approx(student_t.sf(t, df))


def test_look_stats_at_the_last_look_are_the_fixed_designs() -> None:
    rng = np.random.default_rng(6)
    c = simulate(rng, 100, gap=0.02, coupling=0.75, ratio=1.1)
    stats = look_stats(*c.arrays(), DESIGN)
    z = stats.z["damage"][:, -1]
    assert z == pytest.approx(norm.isf(paired_one_sided(c.differences, 0.0, upper=True)))
    arrays = (c.failed_arm, c.calls_arm, c.failed_ref, c.calls_ref)
    amp = norm.isf(ratio_p(*arrays))
    assert stats.z["amplified"][:, -1] == pytest.approx(amp)
    bound = norm.isf(bound_p(*arrays, DESIGN.ratio_margin, DESIGN.difference_margin))
    assert stats.z["bounded"][:, -1] == pytest.approx(bound)
    assert stats.counts == DESIGN.looks(TASKS)


# --- the decision rules, on chosen statistics -------------------------------------------


def test_damage_stops_at_its_look() -> None:
    assert _verdict([_stats(damage=1)]) == [("visible damage", True, 16)]


def test_a_flat_score_alone_never_stops() -> None:
    """A flat score (a drop beyond the margin ruled out) at the first look, the ratio decided
    only at the third: the comparison reads on until then."""
    assert _verdict([_stats(flat=0, bounded=2)]) == [("no damage detected", True, 24)]
    assert _verdict([_stats(flat=0, amplified=2)]) == [("flat score, amplified failures", True, 24)]
    # At the design's maximum the rule is the fixed design's: a flat score with no
    # amplification decided is "no damage detected"; the bound only lets it stop early.
    assert _verdict([_stats(flat=0)]) == [("no damage detected", True, 32)]


def test_amplification_without_a_flat_score_is_not_a_verdict() -> None:
    assert _verdict([_stats(amplified=0)]) == [("inconclusive", False, 32)]
    assert _verdict([_stats(amplified=0, damage=3)]) == [("visible damage", True, 32)]


def test_damage_takes_precedence_at_the_same_look() -> None:
    """A significant drop at the look where a drop beyond the margin is ruled out is damage
    (the fixed design, with one look, reads a significant drop inside the margin as "no
    damage detected"; docs/analysis.md)."""
    assert _verdict([_stats(damage=1, flat=1, bounded=0)]) == [("visible damage", True, 16)]


def test_rejections_are_final() -> None:
    """A flat score at look 1 stays decided although its statistic falls back later."""
    s = _stats(bounded=3)
    z = dict(s.z)
    z["flat"] = np.array([[50.0, -1.0, -1.0, -1.0]])
    stats = LookStats(z=z, counts=s.counts, maximum=s.maximum)
    assert _verdict([stats]) == [("no damage detected", True, 32)]


def _holm_pair(first: float, second: float) -> list[tuple[str, bool, int]]:
    """Two comparisons of 16 tasks; damage statistics at the second look only."""
    out = []
    for value in (first, second):
        s = _stats(16)
        z = dict(s.z)
        z["damage"] = np.array([[-1.0, value]])
        out.append(LookStats(z=z, counts=s.counts, maximum=s.maximum))
    return _verdict(out)


def test_holm_passes_a_rejections_share_on() -> None:
    """At level α/2 (one-sided damage) split over two comparisons, a statistic between the
    α/4 and the α/2 boundary is rejected only when the other comparison is rejected first."""
    level = RULES.levels()["damage"]
    strict, loose = (
        boundaries(16, RULES, "damage", level / 2)[1],
        boundaries(16, RULES, "damage", level)[1],
    )
    between = (strict + loose) / 2
    assert _holm_pair(50.0, between)[1][0] == "visible damage"
    assert _holm_pair(-1.0, between)[1][0] == "inconclusive"
    assert _holm_pair(-1.0, strict + 1e-6)[1][0] == "visible damage"


def test_comparisons_of_different_sizes() -> None:
    """A comparison with fewer paired tasks ends at its own maximum."""
    out = _verdict([_stats(20), _stats(40, damage=4)])
    assert out == [("inconclusive", False, 20), ("visible damage", True, 40)]


# --- the simulation (issue 47's "done when") -------------------------------------------


Row = dict[str, float | str]


def condition(
    rng: np.random.Generator,
    gap: float,
    s: float,
    pairing: str,
    ratio: float = 1.0,
    planted: bool = False,
    studies: int = STUDIES,
) -> Row:
    channel_ratios = PLANTED if planted else None
    c = simulate(
        rng,
        studies,
        gap,
        s,
        COUPLINGS[pairing],
        ratio,
        channel_ratios=channel_ratios,
        concentration=CONCENTRATIONS.get(s, CONCENTRATION),
    )
    stats = look_stats(*c.arrays(), DESIGN, channels=c.channels())
    dec = decide([stats], DESIGN)
    verdict = dec.verdict[:, 0]
    tasks = dec.tasks([stats.counts])[:, 0]
    fixed_damage = (paired_test(c.differences) < DESIGN.alpha) & (c.differences.mean(-1) > 0)
    fixed_flat = paired_one_sided(c.differences, DESIGN.margin, upper=False) < DESIGN.alpha
    fixed_ratio = rate_ratio_test(
        c.failed_arm, c.calls_arm, c.failed_ref, c.calls_ref, interval=False
    )
    fixed_amp = (fixed_ratio.p_value < DESIGN.alpha) & (fixed_ratio.ratio > 1)
    ch = c.channels()
    per_channel = rate_ratio_test(
        ch.failed_arm, ch.den_arm, ch.failed_ref, ch.den_ref, interval=False
    )
    # the fixed design: Holm over the channels at α (two-sided p), amplified = an increase
    p_ch = np.nan_to_num(per_channel.p_value, nan=1.0)
    order = np.argsort(p_ch, axis=-1)
    steps = np.take_along_axis(p_ch, order, -1) <= DESIGN.alpha / np.arange(p_ch.shape[-1], 0, -1)
    up = np.take_along_axis(np.nan_to_num(per_channel.ratio, nan=0.0), order, -1) > 1
    fixed_channel = (np.cumprod(steps, axis=-1).astype(bool) & up).any(axis=-1)
    return {
        "gap": gap,
        "success": s,
        "pairing": pairing,
        "ratio": ratio,
        "channels": "planted" if planted else "uniform",
        **{VERDICTS[i]: float(np.mean(verdict == i)) for i in range(len(VERDICTS))},
        "median_tasks": float(np.median(tasks)) / TASKS,
        "damage": float(dec.damage[:, 0].mean()),
        "flat": float(dec.flat[:, 0].mean()),
        "amplified": float(dec.amplified[:, 0].mean()),
        "bounded": float(dec.bounded[:, 0].mean()),
        "channel": float(dec.channel_amplified[:, 0].mean()),
        "fixed_channel": float(fixed_channel.mean()),
        "fixed_damage": float(fixed_damage.mean()),
        "fixed_flat": float(fixed_flat.mean()),
        "fixed_amplified": float(np.nan_to_num(fixed_amp).mean()),
    }


def _conditions(profiles: tuple[float, ...]) -> list[tuple[float, float, str, float, bool]]:
    return [
        (gap, s, pairing, ratio, False)
        for gap, ratio in ((0.0, 1.0), (0.075, 1.0), (0.2, 1.0), (0.0, 2.0), (0.1, 1.0))
        for pairing in COUPLINGS
        for s in profiles
    ] + [(0.0, s, pairing, 1.0, True) for pairing in COUPLINGS for s in profiles]


CONDITIONS = _conditions(PROFILES[:2]) + _conditions((HETEROGENEOUS,))
"""The heterogeneous profile's conditions come last, so the others draw what they drew
before it was added."""


@functools.cache
def table(seed: int = 47, studies: int = STUDIES) -> list[Row]:
    """Every condition at the full size; the small size keeps the 90%-success and the
    heterogeneous profiles."""
    rng = np.random.default_rng(seed)
    kept = [c for c in CONDITIONS if studies >= STUDIES or c[1] in (0.9, HETEROGENEOUS)]
    return [condition(rng, *c, studies=studies) for c in kept]


@dataclass(frozen=True)
class Size:
    """The simulation at `studies` per condition; `tol` widens each bound by two Monte
    Carlo standard errors of a 5% rate at that size (none at the full 2,000)."""

    studies: int

    @property
    def tol(self) -> float:
        return 0.0 if self.studies >= STUDIES else self.edge

    @property
    def edge(self) -> float:
        """Two Monte-Carlo standard errors of a 5% rate at this size."""
        return 2 * math.sqrt(0.05 * 0.95 / self.studies)

    def rows(self, **match: float | str) -> list[Row]:
        rows = [r for r in table(studies=self.studies) if all(r[k] == v for k, v in match.items())]
        assert rows
        return rows


@pytest.fixture(
    params=[
        pytest.param(STUDIES, id="full", marks=pytest.mark.slow),
        pytest.param(SMALL_STUDIES, id="small"),
    ]
)
def size(request: pytest.FixtureRequest) -> Size:
    """The full-size simulation in the slow tier; 200 studies of the 90%-success conditions in
    the fast suite."""
    return Size(request.param)


def test_no_gap_damage_claimed_at_most_5_percent(size: Size) -> None:
    for r in size.rows(gap=0.0, ratio=1.0):
        assert r["damage"] <= 0.05 + size.tol, r


def test_null_channels_flagged_at_most_5_percent(size: Size) -> None:
    """No channel changed (every condition but the planted one and ×2): a channel is
    decided amplified in ≤ 5% of studies."""
    for r in size.rows(ratio=1.0, channels="uniform"):
        assert r["channel"] <= 0.05 + size.tol, r


def test_planted_single_channel_amplification_is_decided(size: Size) -> None:
    """×3 on the 5% channel (×1.10 on all failed calls, inside the ×1.25 bound), no gap:
    "flat score, amplified failures" in ≥ 80% with coupled trials, and wherever a flat score
    is shown about as often (within 5 points); "no damage detected" (the control missed)
    in ≤ 5%."""
    for r in size.rows(channels="planted", pairing="coupled"):
        assert r["flat score, amplified failures"] >= 0.80 - size.tol, r
    for r in size.rows(channels="planted"):
        assert r["no damage detected"] <= 0.05 + size.tol, r
        flat = float(r["flat score, amplified failures"])
        assert flat >= float(r["fixed_flat"]) - 0.05 - size.tol, r


def reaches_5_percent(hits: int, studies: int) -> bool:
    """The exact (Clopper–Pearson) 95% interval of a simulated rate reaches 5%: a test's size
    at its margin is bounded up to Monte-Carlo error (the fixed design's one-sided test runs
    at 4.7–5.5% in this model; TOST's size test in test_coverage.py does the same)."""
    return bool(binomtest(hits, studies, 0.05).proportion_ci(0.95).low <= 0.05)


@pytest.mark.slow  # the table's 2,000 studies per condition; the fast version is below
def test_gap_at_the_margin_flat_score_claimed_at_most_5_percent() -> None:
    for r in Size(STUDIES).rows(gap=0.075):
        assert reaches_5_percent(round(float(r["flat"]) * STUDIES), STUDIES), r


@pytest.mark.parametrize("s", [0.9, HETEROGENEOUS])
def test_a_flat_score_at_the_margin_is_claimed_at_most_5_percent(s: float) -> None:
    """The true gap at the margin, independent trials, 3,000 studies of one call an episode
    (the flat score reads success only): a drop beyond the margin is ruled out in ≤ 5%."""
    c = simulate(
        np.random.default_rng(471),
        3000,
        0.075,
        s,
        calls=1,
        concentration=CONCENTRATIONS.get(s, CONCENTRATION),
    )
    flat = decide([look_stats(*c.arrays(), DESIGN)], DESIGN).flat[:, 0]
    assert reaches_5_percent(int(flat.sum()), flat.size), flat.mean()


def test_doubled_failures_flat_score_is_flat_score_amplified_failures(size: Size) -> None:
    for r in size.rows(gap=0.0, ratio=2.0, pairing="coupled"):
        assert r["flat score, amplified failures"] >= 0.80 - size.tol, r


def test_a_20_point_gap_is_decided_early(size: Size) -> None:
    for r in size.rows(gap=0.2):
        assert r["visible damage"] >= 0.95 - size.tol, r
        assert r["median_tasks"] <= 0.35 + size.tol, r


def test_coupled_no_gap_is_no_damage_detected_early(size: Size) -> None:
    for r in size.rows(gap=0.0, ratio=1.0, pairing="coupled", channels="uniform"):
        assert r["no damage detected"] >= 0.80 - size.tol, r
        assert r["median_tasks"] <= 0.60 + size.tol, r


def test_power_at_the_maximum_within_5_points_of_the_fixed_design(size: Size) -> None:
    """Damage at gaps 7.5 and 10, a flat score with no gap, amplification at ×2: the
    sequential test's rate of ever deciding is within 5 points of the fixed design's. On the
    heterogeneous profile damage at the margin with independent trials sits near the bound
    (4.7 ± 0.2 points below on 20,000 studies, 5.4 in this table's 2,000; docs/analysis.md,
    γ), so there the bound carries two Monte-Carlo standard errors of a 5% rate; at the small
    size (200 studies) that row is too noisy for a bound at its edge and is left to the full
    size."""
    for r in size.rows(ratio=1.0, channels="uniform"):
        hetero = r["success"] == HETEROGENEOUS
        edge = size.tol or hetero * Size(STUDIES).edge
        if float(r["gap"]) in (0.075, 0.1) and not (size.tol and hetero):
            assert float(r["damage"]) >= float(r["fixed_damage"]) - 0.05 - edge, r
        if r["gap"] == 0.0:
            assert float(r["flat"]) >= float(r["fixed_flat"]) - 0.05 - size.tol, r
    for r in size.rows(ratio=2.0):
        assert float(r["amplified"]) >= float(r["fixed_amplified"]) - 0.05 - size.tol, r


def true_sd(trials: int, s: float, concentration: float) -> float:
    """σ of a task's success difference with no gap and independent trials, exactly: one
    trial pair has Var(x_ref − x_arm | q) = 2q(1 − q), trials are independent given q, and q
    ~ Beta(c·s, c·(1 − s))."""
    a, b = concentration * s, concentration * (1 - s)
    m1, m2 = a / (a + b), a * (a + 1) / ((a + b) * (a + b + 1))
    return math.sqrt(2 * (m1 - m2) / trials)


def test_heterogeneous_tasks_are_cleared_as_the_true_variance_allows(size: Size) -> None:
    """Beta(0.9, 0.9) task solve probabilities, no gap, independent trials (114 × 4): a drop
    beyond the margin is ruled out within 5 points of what the test that knows the true
    variance can do (mean < margin − z₀.₉₅·σ/√n: 88%), and "no damage detected" within 5
    points of the two-sided true-variance TOST's 76% (before the flat score was one-sided,
    the sequential reading cleared 68%)."""
    se = true_sd(4, HETEROGENEOUS, CONCENTRATIONS[HETEROGENEOUS]) / math.sqrt(TASKS)
    reach = DESIGN.margin / se - norm.ppf(1 - DESIGN.alpha)
    one_sided, two_sided = norm.cdf(reach), 2 * norm.cdf(reach) - 1
    assert one_sided == pytest.approx(0.881, abs=0.002)
    assert two_sided == pytest.approx(0.762, abs=0.002)
    (r,) = size.rows(
        success=HETEROGENEOUS, gap=0.0, ratio=1.0, pairing="independent", channels="uniform"
    )
    assert float(r["flat"]) >= one_sided - 0.05 - size.tol, r
    assert float(r["no damage detected"]) >= two_sided - 0.05 - size.tol, r


def test_family_wise_error_over_four_null_comparisons(size: Size) -> None:
    """Four comparisons with neither a gap nor more failures (coupled trials, one study =
    four comparisons decided together with Holm): damage or amplification claimed for any of
    them in ≤ 5% of studies."""
    rng = np.random.default_rng(470)
    sims = [simulate(rng, size.studies, 0.0, 0.9, 0.0) for _ in range(4)]
    stats = [look_stats(*c.arrays(), DESIGN, channels=c.channels()) for c in sims]
    dec = decide(stats, DESIGN)
    assert dec.damage.any(axis=-1).mean() <= 0.05 + size.tol
    assert dec.amplified.any(axis=-1).mean() <= 0.05 + size.tol
    assert dec.channel_owner.size == 4 * 5
    assert dec.channels.any(axis=-1).mean() <= 0.05 + size.tol


def markdown(rows: list[Row]) -> str:
    head = (
        "| trials | s | true gap | failure ratio | visible damage | flat score, amplified "
        "| no damage | inconclusive | median tasks | damage: seq. / fixed "
        "| flat score: seq. / fixed | amplified: seq. / fixed | a channel amplified: seq. / fixed |"
    )
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]

    def pct(x: float | str) -> str:
        return f"{100 * float(x):.1f}%"

    for r in rows:
        lines.append(
            f"| {r['pairing']} | {r['success']} | {100 * float(r['gap']):g} | ×{r['ratio']:g} "
            f"{' (×3 on one channel)' if r['channels'] == 'planted' else ''} "
            f"| {pct(r['visible damage'])} | {pct(r['flat score, amplified failures'])} "
            f"| {pct(r['no damage detected'])} | {pct(r['inconclusive'])} "
            f"| {pct(r['median_tasks'])} | {pct(r['damage'])} / {pct(r['fixed_damage'])} "
            f"| {pct(r['flat'])} / {pct(r['fixed_flat'])} "
            f"| {pct(r['amplified'])} / {pct(r['fixed_amplified'])} "
            f"| {pct(r['channel'])} / {pct(r['fixed_channel'])} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(table()))


def test_a_run_short_of_its_maximum_is_open() -> None:
    """48 tasks of a 114-task design: only the looks at 30…48, with the 114-task boundaries
    (stricter than a 40-task design's last look); undecided means open, not inconclusive at
    a final look."""
    rng = np.random.default_rng(9)
    c = simulate(rng, 200, gap=0.0, s=0.9, coupling=0.75)
    head = [a[:, :50] for a in c.arrays()]
    short = look_stats(*head, DESIGN, maximum=TASKS)
    assert short.counts == [30, 36, 42, 48] and short.maximum == TASKS
    whole = look_stats(*(a[:, :48] for a in c.arrays()), DESIGN)
    assert whole.maximum == 48
    strict = boundaries(TASKS, DESIGN, "damage", 0.025)[:4]
    assert np.all(strict > boundaries(48, DESIGN, "damage", 0.025)[-1])
    dec = decide([short], DESIGN)
    assert dec.tasks([short.counts]).max() <= 48
    none = look_stats(*(a[:, :5] for a in c.arrays()), DESIGN, maximum=TASKS)
    assert none.counts == []
    assert not decide([none], DESIGN).decided.any()
