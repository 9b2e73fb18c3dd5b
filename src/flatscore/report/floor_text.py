"""The noise floor in words (docs/analysis.md, "Noise floor"): how the reference was split
against itself, why a diagnostic has no floor, and why the arm's failures are or are not
beyond it. The analysis keeps the floor as numbers (`analysis.noise_floor`: the splits, the
resamples, each diagnostic's floor and interval, the reference's own names); analysis.json's
`method`, `invariance_reason` and notes are these words (`analysis_text.worded`)."""

from __future__ import annotations

from collections.abc import Callable

from flatscore.analysis.noise_floor import MIN_REFERENCE_NAMES, worse_than_floor
from flatscore.analysis.result import FloorNote, FloorStat, NoiseFloor

NO_FLOOR = "the reference has fewer than 2 trials"

FLOOR_NOTES: dict[FloorNote, str] = {
    "names_in_half": "undefined: too few hallucinated names in a half",
    "no_interval": "too few paired tasks for an interval: not compared with the floor",
    "undefined_halves": "undefined in the reference's halves",
}


def method(nf: NoiseFloor) -> str:
    """How the floor was made: the halves, the splits and the resamples."""
    if not nf.splits:
        return f"no floor: {NO_FLOOR}"
    first, second = nf.trials_per_half
    resampled = (
        f"; excess intervals and the floors' standard errors: task bootstrap, first "
        f"{nf.resamples} of the cell's resamples"
        if nf.resamples is not None
        else "; too few paired tasks for a bootstrap interval"
    )
    return (
        f"reference trials split into balanced halves ({first} + {second} trials), "
        f"{nf.splits} distinct split(s) in both orientations, averaged; the arm is compared "
        f"at the same size (reference half vs the arm's other half){resampled}"
    )


def untestable(names: int) -> str:
    """The invariance reason when the floor rests on too few of the reference's names."""
    return (
        "untestable: too few of the reference's own names "
        f"({names} distinct hallucinated name(s) on the paired tasks; the floor needs "
        f"≥ {MIN_REFERENCE_NAMES})"
    )


def _show(s: FloorStat, name: str, pct: bool) -> str:
    f: Callable[[float], str] = (lambda x: f"{100 * x:.0f}%") if pct else (lambda x: f"{x:.2f}")
    assert s.floor is not None and s.arm_half is not None
    return (
        f"{name} {f(s.arm_half)} vs the reference's own {f(s.floor)} at half the trials "
        f"(excess, unadjusted 95% CI {f(s.ci_low or 0.0)} to {f(s.ci_high or 0.0)})"
    )


def invariance_reason(nf: NoiseFloor) -> str:
    """Why the arm's hallucinated names are (or are not, or cannot be said to be) beyond
    the reference's own floor, with ρ and the novel share against it."""
    if not nf.splits:
        return f"no noise floor: {NO_FLOOR}"
    if nf.reference_names is not None and nf.reference_names < MIN_REFERENCE_NAMES:
        return untestable(nf.reference_names)
    if nf.invariance == "not decided":
        return "no interval against the floor (too few paired tasks or hallucinated names)"
    rho, novel = nf.diagnostics["spearman_rho"], nf.diagnostics["novel_fraction"]
    parts = []
    if rho.beyond_floor is not None:
        parts.append(_show(rho, "ρ", False))
    if novel.beyond_floor is not None:
        parts.append(_show(novel, "novel share", True))
    worse = worse_than_floor(rho, novel)
    if worse:
        return (
            "the arm's failures differ from the reference's more than the reference's differ "
            "from its own (" + ", ".join(worse) + "): " + "; ".join(parts)
        )
    return (
        "the arm's failures are not shown to differ from the reference's more than chance "
        "makes the reference differ from itself: " + "; ".join(parts)
    )


def worded_floor(nf: NoiseFloor) -> NoiseFloor:
    """`nf` with its method, invariance reason and notes in words (itself when it has
    them: a floor read back from analysis.json)."""
    if nf.method:
        return nf
    diagnostics = {
        key: s.model_copy(update={"note": FLOOR_NOTES[s.note_code]})
        if s.note is None and s.note_code is not None
        else s
        for key, s in nf.diagnostics.items()
    }
    return nf.model_copy(
        update={
            "method": method(nf),
            "invariance_reason": invariance_reason(nf),
            "diagnostics": diagnostics,
        }
    )
