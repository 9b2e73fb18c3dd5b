"""The noise floor in words (`report.floor_text`): the method from the splits and the
resamples, the invariance reason from ρ and the novel share against the reference's own
floor, and each diagnostic's note from its code; `analyze` leaves all of them empty."""

from __future__ import annotations

from flatscore.analysis.result import FloorStat, NoiseFloor
from flatscore.report.floor_text import invariance_reason, method, worded_floor


def _level(arm_half: float, floor: float, lo: float, hi: float) -> FloorStat:
    return FloorStat(
        kind="level",
        arm=arm_half,
        floor=floor,
        arm_half=arm_half,
        excess=arm_half - floor,
        ci_low=lo,
        ci_high=hi,
        beyond_floor=lo > 0 or hi < 0,
    )


def _floor(rho: FloorStat, novel: FloorStat, **kw: object) -> NoiseFloor:
    values: dict[str, object] = {
        "splits": 3,
        "trials_per_half": [2, 2],
        "resamples": 200,
        "diagnostics": {"spearman_rho": rho, "novel_fraction": novel},
        "invariance": "not beyond the noise floor",
        "method": "",
        "invariance_reason": "",
        "reference_names": 25,
        **kw,
    }
    return NoiseFloor.model_validate(values)


def test_the_method_says_the_halves_splits_and_resamples() -> None:
    nf = _floor(_level(0.5, 0.6, -0.2, 0.1), _level(0.1, 0.05, -0.01, 0.1))
    assert method(nf) == (
        "reference trials split into balanced halves (2 + 2 trials), 3 distinct split(s) in "
        "both orientations, averaged; the arm is compared at the same size (reference half vs "
        "the arm's other half); excess intervals and the floors' standard errors: task "
        "bootstrap, first 200 of the cell's resamples"
    )
    few = nf.model_copy(update={"resamples": None})
    assert method(few).endswith("; too few paired tasks for a bootstrap interval")
    none = NoiseFloor(
        splits=0, diagnostics={}, invariance="not decided", method="", invariance_reason=""
    )
    assert method(none) == "no floor: the reference has fewer than 2 trials"
    assert invariance_reason(none) == "no noise floor: the reference has fewer than 2 trials"


def test_the_reason_says_which_is_beyond_the_floor_with_its_numbers() -> None:
    rho = _level(0.2, 0.6, -0.55, -0.25)  # ρ below the floor: worse
    novel = _level(0.3, 0.1, -0.05, 0.4)  # inside
    beyond = _floor(rho, novel, invariance="beyond the noise floor")
    assert invariance_reason(beyond) == (
        "the arm's failures differ from the reference's more than the reference's differ from "
        "its own (ρ): ρ 0.20 vs the reference's own 0.60 at half the trials (excess, "
        "unadjusted 95% CI -0.55 to -0.25); novel share 30% vs the reference's own 10% at "
        "half the trials (excess, unadjusted 95% CI -5% to 40%)"
    )
    inside = _floor(_level(0.5, 0.6, -0.3, 0.1), novel)
    assert invariance_reason(inside).startswith(
        "the arm's failures are not shown to differ from the reference's more than chance "
        "makes the reference differ from itself: ρ 0.50 vs the reference's own 0.60"
    )


def test_too_few_names_or_no_interval_leave_it_undecided_in_words() -> None:
    rho, novel = _level(0.5, 0.6, -0.3, 0.1), _level(0.3, 0.1, -0.05, 0.4)
    few_names = _floor(rho, novel, invariance="not decided", reference_names=7)
    assert invariance_reason(few_names) == (
        "untestable: too few of the reference's own names (7 distinct hallucinated name(s) "
        "on the paired tasks; the floor needs ≥ 20)"
    )
    no_interval = _floor(rho, novel, invariance="not decided", resamples=None)
    assert invariance_reason(no_interval) == (
        "no interval against the floor (too few paired tasks or hallucinated names)"
    )


def test_worded_floor_fills_the_notes_once() -> None:
    gap = FloorStat(kind="difference", arm=0.1, note_code="undefined_halves")
    half = FloorStat(kind="level", arm=None, note_code="names_in_half")
    nf = _floor(half, FloorStat(kind="level", arm=0.2, note_code="no_interval"))
    nf.diagnostics["gap.K9"] = gap
    words = worded_floor(nf)
    notes = {k: s.note for k, s in words.diagnostics.items()}
    assert notes == {
        "spearman_rho": "undefined: too few hallucinated names in a half",
        "novel_fraction": "too few paired tasks for an interval: not compared with the floor",
        "gap.K9": "undefined in the reference's halves",
    }
    assert worded_floor(words) is words
