"""Why a number is missing, in words (`report.notes_text`): `analyze` leaves each note empty
with its reason as a code; `worded` says it from the code and the comparison's own counts."""

from __future__ import annotations

import pytest

from analysis_builders import episode
from flatscore.analysis.analyze import analyze
from flatscore.analysis.comparison import gap_amplification
from flatscore.analysis.result import GapPoint
from flatscore.analysis.settings import AnalysisSettings
from flatscore.report.analysis_text import worded
from flatscore.report.notes_text import PAIRED_INTERVAL, gap_note, interval_method

OK, FAIL = ("get_user", "ok"), ("get_user", "fail")
MISSING = ("get_order", "fail")  # a second channel the reference never fails in


def _g(k: int, gap: float, lo: float | None) -> GapPoint:
    return GapPoint(K=k, gap=gap, ci_low=lo, ci_high=None, s_ref=None, s_arm=None)


def test_a_gap_note_names_the_gaps_that_are_not_positive() -> None:
    gaps = [_g(0, -0.018, -0.05), _g(9, -0.004, -0.035)]
    amp = gap_amplification(*gaps)
    assert gap_note(amp, gaps) == (
        "Gap(K=0) = -1.8 points and Gap(K=9) = -0.4 points: no positive gap to amplify "
        "(see gap_growth)"
    )
    noisy = [_g(0, 0.175, 0.129), _g(9, 0.022, -0.017)]
    assert gap_note(gap_amplification(*noisy), noisy) == (
        "Gap(K=9) = +2.2 points is not distinguishable from 0 (its interval includes 0): the "
        "ratio would divide by noise (see gap_growth)"
    )
    grows = [_g(0, 0.16, 0.11), _g(9, 0.04, 0.01)]
    assert gap_note(gap_amplification(*grows), grows) is None


def test_the_interval_method_says_the_bootstrap_or_too_few_tasks() -> None:
    settings = AnalysisSettings(bootstrap=400, bootstrap_min_tasks=10)
    assert interval_method(12, settings) == (
        f"{PAIRED_INTERVAL}; channel ratios: task-clustered log rate ratio (jackknife, t); "
        "other intervals: task bootstrap, 400 resamples"
    )
    assert interval_method(9, settings) == (
        f"{PAIRED_INTERVAL}; 9 paired task(s): too few for a bootstrap interval (needs ≥ 10)"
    )


@pytest.mark.parametrize("tasks", [6, 40])
def test_analyze_leaves_the_notes_empty_and_worded_says_them(tasks: int) -> None:
    """The arm fails `get_order` (a channel new in the arm) on every other task; with 6
    paired tasks every bootstrap interval is missing for too few tasks."""
    episodes = [
        episode(arm, f"t{t}", 0, [MISSING, OK] if arm == "q" and t % 2 else [OK])
        for arm in ("ref", "q")
        for t in range(tasks)
    ]
    analysis = analyze(episodes, AnalysisSettings(bootstrap=100))
    (c,) = analysis.cells[0].comparisons
    assert c.interval_method == "" and c.spearman_note is None
    assert all(a.note is None for a in c.channel_amplification.values())
    (w,) = worded(analysis).cells[0].comparisons
    new = next(ch for ch, a in c.channel_amplification.items() if "new_in_arm" in a.note_codes)
    arm_calls = c.channel_amplification[new].count_arm
    assert arm_calls == tasks // 2
    said = f"new in the arm: the reference never failed this way, the arm did {arm_calls} time(s)"
    few = f"{tasks} paired task(s): too few for a bootstrap interval (needs ≥ 30)"
    if tasks < 30:
        assert w.channel_amplification[new].note == f"{said}; {few}"
        assert w.interval_method == f"{PAIRED_INTERVAL}; {few}"
        assert w.trajectory_difference[next(iter(w.trajectory_difference))].note == few
    else:
        assert w.channel_amplification[new].note == (
            f"{said}; exact sign test over tasks: {tasks // 2} task(s) only in the arm, 0 only "
            "in the reference"
        )
        assert w.interval_method.endswith("other intervals: task bootstrap, 100 resamples")
    assert w.channel_amplification["role_confusion"].note == (
        "no failures in this channel in either arm"
    )
    assert c.spearman_note_code == "too_few_names" and c.hallucinated_names_union < 2
    assert w.spearman_note == (
        f"undefined: {c.hallucinated_names_union} hallucinated name(s) in the union (need ≥ 2)"
    )
    assert worded(worded(analysis)) == worded(analysis)
