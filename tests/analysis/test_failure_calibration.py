"""The failure-count inference calibrated on both kinds of data (docs/analysis.md, "Failures
cluster in tasks"): the smooth gamma-propensity model of tests/sequential_model.py and
per-task profiles resampled from the committed studies' own episodes (tests/real_profiles.py),
where a few tasks hold most of a reference's failed calls. Each error rate is bounded from
both sides where it can be (a test far below its level wastes power), and each promised power
is checked on the real planted arms. Fast versions use study v3 (small archives); the
full-size runs over study v1's 114 × 4 reference are `slow`."""

from __future__ import annotations

import numpy as np
import pytest

from flatscore.analysis.paired_score import paired_one_sided
from flatscore.analysis.rate_ratio import bound_p, rate_ratio_test
from flatscore.analysis.sequential import VERDICTS, SequentialDesign, decide, look_stats
from real_profiles import V1, V2, V3, Draw, paired_draw, profile, split_null
from sequential_model import simulate

ALPHA = 0.05
DESIGN = SequentialDesign()


def false_amplification(d: Draw) -> tuple[float, float]:
    """(two-sided rejection rate, rate of a significant increase) of all failed calls."""
    t = rate_ratio_test(*d.rates(), interval=False)
    p = np.nan_to_num(t.p_value, nan=1.0)
    return float(np.mean(p < ALPHA)), float(np.mean((p < ALPHA) & (t.ratio > 1)))


def against_ref(arm: str, domain: str, tasks: int, studies: int, seed: int) -> Draw:
    """Study v3's `arm` against its reference in `domain`, `tasks` common tasks resampled."""
    ref = profile(V3, "ref", domain)
    return paired_draw(profile(V3, arm, domain), ref, tasks, studies, np.random.default_rng(seed))


def synthetic_null(studies: int, seed: int, base: float) -> Draw:
    c = simulate(np.random.default_rng(seed), studies, base=base)
    return Draw(c.failed_arm, c.calls_arm, c.failed_ref, c.calls_ref, c.differences)


@pytest.mark.parametrize("base", [0.02, 0.3])
def test_size_on_the_smooth_model(base: float) -> None:
    """Gamma per-task propensity, 114 × 4, 400 null studies: the two-sided test rejects in
    2–9% (nominal 5%), an increase in at most 5%."""
    both, up = false_amplification(synthetic_null(400, 63, base))
    print(f"smooth base {base}: rejected {both:.3f}, increase {up:.3f}")
    assert 0.02 <= both <= 0.09 and up <= 0.05


@pytest.mark.parametrize("domain", ["retail", "telecom"])
def test_size_on_resampled_nulls(domain: str) -> None:
    """Study v3's reference, each drawn task's two trials split 1 + 1, 114 tasks, 400
    studies: the two-sided test rejects in 1–9%, an increase in at most 5% — in telecom, where
    a few tasks hold most of the reference's failed calls, as in retail."""
    d = split_null(profile(V3, "ref", domain), 1, 114, 400, np.random.default_rng(64))
    both, up = false_amplification(d)
    print(f"v3 ref 1+1 {domain}: rejected {both:.3f}, increase {up:.3f}")
    assert 0.01 <= both <= 0.09 and up <= 0.05


@pytest.mark.parametrize("domain", ["retail", "telecom"])
def test_planted_bad_arguments_are_found_in_real_profiles(domain: str) -> None:
    """Study v3's planted control (a required argument dropped from 10% of calls) against
    its reference, bad_arguments, tasks resampled (114, 200 studies): an increase significant
    at the Holm step of a 31-test family (p < 0.05 / 31) in ≥ 90% of studies. The jackknife
    this test replaced found it in telecom in 78% even before any correction."""
    arm = profile(V3, "ref-planted", domain, "bad_arguments")
    ref = profile(V3, "ref", domain, "bad_arguments")
    d = paired_draw(arm, ref, 114, 200, np.random.default_rng(65))
    t = rate_ratio_test(*d.rates(), interval=False)
    hit = np.nan_to_num(t.p_value, nan=1.0) < ALPHA / 31
    rate = float(np.mean(hit & (t.ratio > 1)))
    print(f"v3 planted {domain}: {rate:.3f}")
    assert rate >= 0.90


def test_one_task_holding_the_references_failures_in_resampled_studies() -> None:
    """Study v3 telecom's int4 against its reference on 30 tasks drawn from their 30 common
    ones (200 studies): the increase is significant in ≥ 90% with the interval's lower end
    above 1; no finite interval spans five orders of magnitude (an end the data cannot bound
    is unbounded, not a number). The jackknife found 20%."""
    d = against_ref("int4", "telecom", 30, 200, seed=66)
    t = rate_ratio_test(*d.rates())
    found = (np.nan_to_num(t.p_value, nan=1.0) < ALPHA) & (t.ci_low > 1)
    print(f"v3 int4 telecom 30 tasks: {found.mean():.3f}")
    assert found.mean() >= 0.90
    finite = np.isfinite(t.ci_high) & (t.ci_low > 0)
    assert np.all(np.log10(t.ci_high[finite] / t.ci_low[finite]) < 5)


def test_the_bound_is_not_claimed_for_an_amplified_arm() -> None:
    """×1.5 at a 10% reference rate (5 extra failed calls per 100, beyond both margins):
    "no amplification" claimed in ≤ 5% of 400 smooth studies; study v3's int4 against its
    reference (resampled, 114 tasks) never."""
    c = simulate(np.random.default_rng(67), 400, ratio=1.5, base=0.1)
    smooth = bound_p(c.failed_arm, c.calls_arm, c.failed_ref, c.calls_ref, 1.25, 0.02)
    assert np.mean(smooth < ALPHA) <= 0.05
    d = against_ref("int4", "retail", 114, 100, seed=68)
    assert not np.any(bound_p(*d.rates(), 1.25, 0.02) < ALPHA)


def fixed_clears(d: Draw) -> np.ndarray:
    """The fixed design's "no damage detected" on all failed calls: a drop beyond the margin
    ruled out (TOST's upper test; a significant drop inside the margin is not damage), no
    significant increase of failed calls."""
    flat = paired_one_sided(d.differences, DESIGN.margin, upper=False) < ALPHA
    t = rate_ratio_test(*d.rates(), interval=False)
    amplified = (np.nan_to_num(t.p_value, nan=1.0) < ALPHA) & (t.ratio > 1)
    return flat & ~amplified


def sequential_reading(d: Draw) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(no damage detected, amplified, damage) of each study read sequentially."""
    stats = look_stats(d.differences, *d.rates(), DESIGN)
    dec = decide([stats], DESIGN)
    verdict = dec.verdict[:, 0]
    return (
        verdict == VERDICTS.index("no damage detected"),
        dec.amplified[:, 0],
        dec.damage[:, 0],
    )


def check_null_reading(d: Draw, label: str) -> None:
    fixed = fixed_clears(d)
    clean, amplified, damage = sequential_reading(d)
    print(
        f"{label}: fixed clears {fixed.mean():.3f}, sequential {clean.mean():.3f}, "
        f"false amplification {amplified.mean():.3f}, false damage {damage.mean():.3f}"
    )
    assert clean.mean() >= fixed.mean() - 0.05
    assert amplified.mean() <= 0.05 and damage.mean() <= 0.05


@pytest.mark.parametrize("domain", ["retail", "telecom"])
def test_sequential_clears_a_resampled_null_as_the_fixed_design_does(domain: str) -> None:
    """Study v3's reference split 1 + 1 (114 tasks, 200 studies), read sequentially: "no
    damage detected" within 5 points of the fixed design's rate; false amplification and
    false damage ≤ 5%."""
    d = split_null(profile(V3, "ref", domain), 1, 114, 200, np.random.default_rng(69))
    check_null_reading(d, f"v3 ref 1+1 {domain}")


def test_sequential_clears_a_smooth_null_as_the_fixed_design_does() -> None:
    check_null_reading(synthetic_null(200, 70, 0.3), "smooth null")


@pytest.mark.slow
@pytest.mark.parametrize("domain", ["retail", "telecom"])
def test_full_size_nulls_from_study_v1(domain: str) -> None:
    """Study v1's reference, each drawn task's 4 trials split 2 + 2, 114 tasks, 1,000
    studies: the score test's size from both sides; the sequential reading clears within 5
    points of the fixed design (before: 50% against 80% in telecom through the CLI), false
    amplification and false damage ≤ 5%. The fixed design's own rate here (success only, no
    channels: 92% retail, 85% telecom) is the one-sided flat score's, not this statistic's."""
    d = split_null(profile(V1, "ref", domain, trials=4), 2, 114, 1000, np.random.default_rng(71))
    both, up = false_amplification(d)
    print(f"v1 ref 2+2 {domain}: rejected {both:.3f}, increase {up:.3f}")
    assert 0.02 <= both <= 0.08 and up <= 0.05
    check_null_reading(d, f"v1 ref 2+2 {domain}")  # seen: retail 92.4 / 91.0%, telecom 84.6 / 83.2%


@pytest.mark.slow
@pytest.mark.parametrize("domain", ["retail", "telecom"])
def test_full_size_planted_pairs(domain: str) -> None:
    """Study v2's planted control against its reference, bad_arguments (and role confusion
    in telecom, where it was planted too), 114 tasks, 500 studies: flagged at p < 0.05 / 67
    (the Holm step of study v2's 67 channel tests) in ≥ 90%."""
    rng = np.random.default_rng(72)
    channels = ["bad_arguments"]
    for channel in channels:
        arm = profile(V2, "ref-planted", domain, channel)
        ref = profile(V2, "ref", domain, channel)
        d = paired_draw(arm, ref, 114, 500, rng)
        t = rate_ratio_test(*d.rates(), interval=False)
        hit = (np.nan_to_num(t.p_value, nan=1.0) < ALPHA / 67) & (t.ratio > 1)
        print(f"v2 planted {domain} {channel}: {hit.mean():.3f}")
        assert hit.mean() >= 0.90
