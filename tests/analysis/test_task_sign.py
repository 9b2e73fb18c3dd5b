"""The exact sign test over tasks for channels new in the arm (or too sparse for the
task-clustered ratio): known answers, its place in the channel family and the verdicts, and
a simulation bounding its false-flag rate (the reference against itself) from both sides
and its power on planted damage."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from analysis_builders import episode
from flatscore.analysis.analyze import AnalysisOptions, analyze
from flatscore.analysis.result import Comparison
from flatscore.analysis.task_sign import task_sign_test
from flatscore.report.analysis_text import worded

OPTS = AnalysisOptions(bootstrap=200, seed=0)


def test_known_answers() -> None:
    # tasks 0 and 4 only in the arm, task 2 in both, the rest in neither: 2 vs 0
    t = task_sign_test(np.array([3, 0, 2, 0, 1]), np.array([0, 0, 1, 0, 0]))
    assert (t.arm_only, t.ref_only) == (2, 0) and t.p_value == pytest.approx(0.5)
    # seven arm-only tasks (Gemma int4-awq's restart_phone in telecom): 2 · 2⁻⁷
    seven = task_sign_test(np.r_[np.ones(7), np.zeros(107)], np.zeros(114))
    assert seven.p_value == pytest.approx(2.0**-6)
    # 48 against 0 (study v2's planted role confusion)
    assert task_sign_test(np.r_[np.ones(48), np.zeros(66)], np.zeros(114)).p_value == (
        pytest.approx(2.0**-47)
    )
    # balanced and empty: p = 1; per-task means count like counts (> 0 is what matters)
    assert task_sign_test(np.array([1, 1, 1, 0, 0, 0]), np.array([0, 0, 0, 1, 1, 1])).p_value == 1
    assert task_sign_test(np.zeros(5), np.zeros(5)).p_value == 1.0
    half = task_sign_test(np.array([0.5, 0.5, 0, 0, 0]), np.zeros(5))
    assert (half.arm_only, half.p_value) == (2, 0.5)
    # 11 vs 1 (SmolLM2 int4-awq's invented names in telecom): the binomial tail, two-sided
    eleven = task_sign_test(
        np.r_[np.ones(11), 0, np.zeros(100)], np.r_[np.zeros(11), 1, np.zeros(100)]
    )
    assert eleven.p_value == pytest.approx(2 * stats.binom.cdf(1, 12, 0.5))


def _role_confusion_study(arm_tasks: int, tasks: int = 40) -> list:
    """The reference never calls a user tool; the arm calls one (and fails) in the first
    `arm_tasks` tasks; both succeed everywhere."""
    eps = []
    for t in range(tasks):
        eps.append(episode("ref", f"t{t:02d}", 0, [("get_user", "ok")]))
        calls = [("get_user", "ok")]
        if t < arm_tasks:
            calls.insert(0, ("toggle_airplane_mode", "fail"))
        eps.append(episode("int4", f"t{t:02d}", 0, calls))
    return eps


def _only(eps: list) -> Comparison:
    (cell,) = worded(analyze(eps, OPTS.model_copy(update={"reference": "ref"}))).cells
    (c,) = cell.comparisons
    return c


def test_a_channel_new_in_the_arm_is_tested_and_corrected_in_the_family() -> None:
    """7 arm-only tasks: p = 2⁻⁶ for role_confusion and for unknown_tool (its parent), the
    two members of the channel family; Holm doubles the smaller: 2⁻⁵ < 0.05, amplified. All
    failed calls are new too: their own family of one."""
    c = _only(_role_confusion_study(7))
    rc = c.channel_amplification["role_confusion"]
    assert rc.ratio is None and (rc.count_arm, rc.count_ref) == (7, 0)
    assert rc.test == "task_sign" and (rc.tasks_arm_only, rc.tasks_ref_only) == (7, 0)
    assert rc.p_value == pytest.approx(2.0**-6) and rc.p_adjusted == pytest.approx(2.0**-5)
    assert rc.amplified and "role_confusion" in c.amplified_channels
    assert "exact sign test over tasks: 7 task(s) only in the arm" in (rc.note or "")
    assert c.failed_calls is not None and c.failed_calls.amplified
    assert c.verdict == "flat score, amplified failures"
    assert "role_confusion new: 0 → 7 calls" in c.verdict_reason
    untested = c.channel_amplification["bad_arguments"]
    assert untested.test is None and untested.p_value is None


def test_a_few_new_calls_are_tested_and_not_flagged() -> None:
    """4 arm-only tasks: p = 2⁻³ = 0.125, tested, not amplified (the verdict may still rest
    on the gap at K = 0, which those four failed calls open)."""
    c = _only(_role_confusion_study(4))
    rc = c.channel_amplification["role_confusion"]
    assert rc.p_value == pytest.approx(0.125) and not rc.amplified
    assert c.amplified_channels == [] and "amplified channel" not in c.verdict_reason


def test_below_the_task_minimum_nothing_is_tested() -> None:
    c = _only(_role_confusion_study(7, tasks=12))
    rc = c.channel_amplification["role_confusion"]
    assert rc.p_value is None and rc.test is None and "too few" in (rc.note or "")


def test_all_of_the_references_failures_in_one_task_get_the_ratio_test() -> None:
    """The reference fails this way only in task 0, the arm in tasks 0-9: the ratio exists
    ((10/50) / (1/41) per call) and the task-clustered score test decides it (10 tasks where
    either failed: 9 df); one task cannot bound the ratio from above (no upper end)."""
    eps = []
    for t in range(40):
        ref_calls = [("get_user", "ok")] + ([("toggle_airplane_mode", "fail")] if t == 0 else [])
        arm_calls = [("get_user", "ok")] + ([("toggle_airplane_mode", "fail")] if t < 10 else [])
        eps += [
            episode("ref", f"t{t:02d}", 0, ref_calls),
            episode("int4", f"t{t:02d}", 0, arm_calls),
        ]
    rc = _only(eps).channel_amplification["role_confusion"]
    assert rc.ratio == pytest.approx((10 / 50) / (1 / 41))
    assert rc.ci_low is not None and rc.ratio is not None and rc.ci_high is None
    assert 1.0 < rc.ci_low < rc.ratio
    assert rc.test == "rate_ratio" and rc.p_value is not None and rc.p_value < 0.01
    assert rc.amplified


def _flag_rate(studies: int, mult: float, seed: int, new: bool = False) -> float:
    """Share of simulated studies (114 tasks × 2 trials) where the sign test gives p < 0.05
    for an increase: a sparse channel whose per-task propensity is gamma (shape 0.3, mean
    0.05 per episode: most tasks never show it), the arm at `mult` times the reference's
    rate (`new`: the reference never shows it, the arm at the base rate)."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(studies):
        lam = rng.gamma(0.3, 0.05 / 0.3, size=114)[:, None]
        ref = rng.poisson(0.0 if new else lam, size=(114, 2)).sum(axis=1)
        arm = rng.poisson(mult * lam, size=(114, 2)).sum(axis=1)
        t = task_sign_test(arm, ref)
        hits += t.p_value < 0.05 and t.arm_only > t.ref_only
    return hits / studies


def test_the_reference_against_itself_is_rarely_flagged_and_planted_damage_is() -> None:
    """Negative control (the arm draws from the reference's own rates): flagged for an
    increase in 1–4% of 2,000 studies (seen 1.3%: the two-sided exact test at 0.05 spends
    at most 2.5% per side, less for its discreteness). Planted: ×5 the reference's rate is
    flagged in ≥ 80% (seen 98%); a channel new in the arm at the base rate in ≥ 85% (seen
    93%: about 8 tasks show it)."""
    null = _flag_rate(2000, 1.0, seed=1)
    ci = stats.binomtest(round(null * 2000), 2000).proportion_ci(0.95, method="exact")
    assert ci.low >= 0.005 and ci.high <= 0.04, (null, ci)
    assert _flag_rate(300, 5.0, seed=2) >= 0.80
    assert _flag_rate(300, 1.0, seed=3, new=True) >= 0.85
