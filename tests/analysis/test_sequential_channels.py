"""Per-channel amplification in the sequential decision (`analysis.sequential_channels`,
`sequential.decide`): the statistics are the fixed design's, one-sided; the channel family's
Holm; a channel that looks amplified keeps a comparison from stopping on "no damage
detected". The simulation rates (null channels, the planted single-channel control) are in
tests/analysis/test_sequential.py."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom, norm

from flatscore.analysis.rate_ratio import rate_ratio_test, ratio_p
from flatscore.analysis.sequential import (
    VERDICTS,
    LookStats,
    SequentialDesign,
    boundaries,
    decide,
    look_stats,
)
from flatscore.analysis.sequential_channels import (
    ChannelCounts,
    channel_p,
    channel_z,
    sign_test_greater,
)
from flatscore.analysis.task_sign import task_sign_test
from sequential_model import PLANTED, RULES, simulate
from sequential_model import crossing_stats as _stats
from sequential_model import rule_verdicts as _verdict

DESIGN = SequentialDesign()


def test_sign_test_known_answer() -> None:
    """5 tasks only in the arm, 1 only in the reference, 2 in both, 2 in neither:
    P(X ≥ 5), X ~ Binomial(6, 1/2) = 7/64; half the two-sided test's p when it leans up."""
    arm = np.array([1, 2, 1, 1, 3, 0, 1, 1, 0, 0], float)
    ref = np.array([0, 0, 0, 0, 0, 2, 1, 4, 0, 0], float)
    assert float(sign_test_greater(arm, ref)) == pytest.approx(7 / 64)
    assert float(sign_test_greater(arm, ref)) == pytest.approx(binom.sf(4, 6, 0.5))
    two = task_sign_test(arm, ref)
    assert (two.arm_only, two.ref_only) == (5, 1)
    assert float(sign_test_greater(arm, ref)) == pytest.approx(two.p_value / 2)
    assert float(sign_test_greater(np.zeros(4), np.zeros(4))) == 1.0


def test_channel_p_is_the_fixed_designs_test_one_sided() -> None:
    """Where the reference failed this way, the channel's p is the fixed design's score test
    made one-sided (half its two-sided p in the direction of the ratio)."""
    rng = np.random.default_rng(1)
    c = simulate(rng, 40, channel_ratios=PLANTED).channels()
    p = channel_p(*c.head(114))
    fixed = rate_ratio_test(c.failed_arm, c.den_arm, c.failed_ref, c.den_ref, interval=False)
    one_sided = np.where(fixed.ratio > 1, fixed.p_value / 2, 1 - fixed.p_value / 2)
    assert p == pytest.approx(one_sided, rel=1e-9)


def test_a_looping_channel_is_not_carried_by_one_task() -> None:
    """Study v1's fp8 telecom on its first 48 tasks (seed 0 order): 27 unknown-tool
    failures in 5 tasks against 3 in 3. The jackknife this replaced gave p = 1e−5; the score
    test, normalised by its own per-task spread, does not decide on it at the channel level."""
    arm = np.zeros(48)
    ref = np.zeros(48)
    arm[[3, 8, 17, 45, 46]] = np.array([7, 8, 4, 5, 3]) / 4
    ref[[8, 17, 45]] = 1 / 4
    calls = np.full(48, 30.0)
    p = float(channel_p(arm, calls, ref, calls))
    assert 0.0125 / 2 < p < 0.05  # leans up; far from a Holm level over a channel family
    assert p == pytest.approx(float(ratio_p(arm, calls, ref, calls)))


def test_a_channel_new_in_the_arm_gets_the_sign_test() -> None:
    """The reference never fails this way: no ratio, the sign test over tasks; an arm that
    never fails this way: no test (−inf)."""
    arm = np.array([[1.0, 0.5, 0.0, 0.25, 1.0, 0.0, 0.5, 0.75]])
    calls = np.full_like(arm, 6.0)
    zeros = np.zeros_like(arm)
    counts = ChannelCounts(("new",), arm, calls, zeros, calls)
    z = channel_z(counts, [8])
    assert float(z[0, 0]) == pytest.approx(norm.isf(0.5**6))
    none = ChannelCounts(("never",), zeros, calls, arm, calls)
    assert channel_z(none, [8])[0, 0] == -np.inf


def test_channel_z_at_the_last_look() -> None:
    rng = np.random.default_rng(2)
    c = simulate(rng, 30, ratio=1.2)
    stats = look_stats(*c.arrays(), DESIGN, channels=c.channels())
    assert stats.channels is not None and stats.channels.shape == (30, 5, 15)
    ch = c.channels()
    expected = norm.isf(ratio_p(ch.failed_arm, ch.den_arm, ch.failed_ref, ch.den_ref))
    assert stats.channels[..., -1] == pytest.approx(expected, rel=1e-6, abs=1e-6)


def test_an_amplified_channel_makes_a_flat_score_amplified_failures() -> None:
    """A flat score and the bound from the first look, one channel crossing at the third:
    without the channel "no damage detected" at 8 tasks; with it the comparison is held
    back (the channel leans up) and ends "flat score, amplified failures" at 24."""
    assert _verdict([_stats(flat=0, bounded=0)]) == [("no damage detected", True, 8)]
    level = DESIGN.levels()["channel"] / 2  # two channels: Holm's first level
    lean = norm.isf(level) + 0.1  # above the one-look value, below the boundary
    assert lean < boundaries(32, RULES, "channel", level)[0]
    channel = [lean, lean, 50.0, 50.0]
    assert _verdict([_stats(flat=0, bounded=0, channels=(channel, [-1.0] * 4))]) == [
        ("flat score, amplified failures", True, 24)
    ]


def test_a_leaning_channel_holds_back_no_damage_until_it_fades() -> None:
    """Held back while a channel's one-sided p is below α/2 (uncorrected)."""
    lean = norm.isf(DESIGN.levels()["channel"]) + 0.05
    channel = [lean, 0.0, 0.0, 0.0]
    assert _verdict([_stats(flat=0, bounded=0, channels=(channel, [-1.0] * 4))]) == [
        ("no damage detected", True, 16)
    ]
    below = norm.isf(DESIGN.levels()["channel"]) - 0.05
    assert _verdict([_stats(flat=0, bounded=0, channels=([below] * 4, [-1.0] * 4))]) == [
        ("no damage detected", True, 8)
    ]


def test_an_amplified_stop_waits_for_every_leaning_channel() -> None:
    """A flat score and all failed calls amplified from the first look, a second channel
    leaning until it crosses at the third: the comparison reads on and stops "flat score,
    amplified failures" at 24 tasks with both channels named; a channel that never crosses
    but leans to the end holds it to the maximum (32); with no channel leaning it stops at
    the first look."""
    level = DESIGN.levels()["channel"] / 2
    lean = norm.isf(DESIGN.levels()["channel"]) + 0.1
    assert lean < boundaries(32, RULES, "channel", level)[0]
    assert _verdict([_stats(flat=0, amplified=0)]) == [("flat score, amplified failures", True, 8)]
    crossing = _stats(flat=0, amplified=0, channels=([50.0] * 4, [lean, lean, 50.0, 50.0]))
    assert _verdict([crossing]) == [("flat score, amplified failures", True, 24)]
    assert decide([crossing], RULES).channels[0].tolist() == [True, True]
    leaning = _stats(flat=0, amplified=0, channels=([50.0] * 4, [lean] * 4))
    assert _verdict([leaning]) == [("flat score, amplified failures", True, 32)]


def test_at_the_last_look_only_a_decided_channel_counts() -> None:
    """A channel leaning up to the end but never crossing its boundary: "no damage detected"
    at the maximum (the veto is for stopping early, not a verdict)."""
    lean = norm.isf(DESIGN.levels()["channel"]) + 0.1
    assert _verdict([_stats(flat=0, bounded=0, channels=([lean] * 4,))]) == [
        ("no damage detected", True, 32)
    ]


def test_channel_family_is_holm_over_all_comparisons_channels() -> None:
    """Two comparisons with two channels each (a family of 4): a statistic between the α/8
    and α/6 boundaries at the last look is decided only once another channel's rejection
    has passed its share on."""
    level = DESIGN.levels()["channel"]
    b4, b3 = (boundaries(16, RULES, "channel", level / h)[1] for h in (4, 3))
    between = (b4 + b3) / 2

    def run(other: float) -> tuple[bool, ...]:
        stats = [
            _stats(16, channels=([-1.0, other], [-1.0, -1.0])),
            _stats(16, channels=([-1.0, between], [-1.0, -1.0])),
        ]
        return tuple(bool(x) for x in decide(stats, RULES).channels[0])

    assert run(50.0) == (True, False, True, False)
    assert run(-1.0) == (False, False, False, False)
    assert run(50.0) == run(b4 + 1e-6)


def _live(lean: float, design: SequentialDesign) -> tuple[int, bool, int]:
    """A live run of a 32-task design that has read 16 tasks (looks at 8 and 16 of 8, 16,
    24, 32): equivalence and the bound decided from the first look, one channel at `lean`."""
    full = _stats(32, flat=0, bounded=0, channels=([lean] * 4,))
    z = {k: v[..., :2] for k, v in full.z.items()}
    assert full.channels is not None
    live = LookStats(
        z=z, counts=[8, 16], maximum=32, channels=full.channels[..., :2], channel_names=("c0",)
    )
    d = decide([live], design)
    return int(d.verdict[0, 0]), bool(d.decided[0, 0]), int(d.tasks([live.counts])[0, 0])


def test_the_hold_waits_for_the_designs_last_look_not_the_datas() -> None:
    """A channel leaning towards amplified holds "no damage detected" back until the design's
    maximum: a live run whose newest look is its 16th task is not at its last look, so it
    stays open (undecided). With the hold switched off (a hold level no channel reaches) the
    same data stop as "no damage detected" at the first look."""
    lean = norm.isf(DESIGN.levels()["channel"]) + 0.1
    assert lean < boundaries(32, RULES, "channel", DESIGN.levels()["channel"])[1]
    verdict, decided, _ = _live(lean, RULES)
    assert (verdict, decided) == (0, False)
    off = RULES.model_copy(update={"channel_hold": 1e-12})
    assert _live(lean, off) == (VERDICTS.index("no damage detected"), True, 8)
    # Nothing leaning: the live run stops on "no damage detected" at its first look.
    assert _live(-1.0, RULES) == (VERDICTS.index("no damage detected"), True, 8)
