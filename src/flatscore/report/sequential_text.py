"""The sequential reading in words (`analyze --sequential`; docs/analysis.md, "Sequential
verdicts"): the design, the order tasks were read in, each comparison's decision, the gap
after an early stop and the study's saving; and, for sizing a sequential study (`flatscore
power --sequential`), where the pilot's coupling came from. The analysis holds them as data
(`SequentialSummary.ordered_by`, `SequentialComparison`, the settings, `CoupledPair`)."""

from __future__ import annotations

from flatscore.analysis.result import Settings
from flatscore.analysis.sequential import SequentialDesign
from flatscore.analysis.sequential_power import CoupledPair
from flatscore.analysis.sequential_replay import design_for
from flatscore.analysis.sequential_result import SequentialComparison, SequentialSummary, TaskOrder
from flatscore.analysis.settings import in_points
from flatscore.report.verdicts import signed_ci_pts, signed_pts


def describe(design: SequentialDesign) -> str:
    levels = design.levels()
    return (
        f"looks every {design.look_every} paired tasks from {design.first_look_share:.0%} of "
        "the maximum on, and at the maximum; damage (gap > 0, "
        f"one-sided α = {levels['damage']:g}) and amplification (all-channel failed-call "
        f"ratio > 1, α = {levels['amplified']:g}) with Holm across the study's comparisons "
        "(group-sequential form); a flat score (a drop beyond ±"
        f"{in_points(design.margin):g} points ruled out, one-sided α = {levels['flat']:g}) and a "
        f"bound on failed calls (ratio < ×{design.ratio_margin:g} or fewer than "
        f"{in_points(design.difference_margin):g} extra per 100 agent calls, "
        f"α = {levels['bounded']:g}) uncorrected, which alone lets a comparison stop early on "
        '"no damage detected" (at the maximum it reads as the fixed design); '
        "a comparison with a channel leaning towards amplified waits for the maximum; "
        "Hwang–Shih–DeCani spending, γ = "
        f"{design.gamma_damage:g} (damage, amplification) and {design.gamma_equivalence:g} "
        "(flat score, bound); the last look spends what is left"
    )


def order_text(ordered_by: TaskOrder, seed: int) -> str:
    """How the tasks were ordered (`seed`: the analysis seed a random order used)."""
    if ordered_by == "recorded":
        return "tasks in the order the sequential run read them (its recorded task order)"
    if ordered_by == "finished":
        return "tasks in the order their episodes finished (a sequential run)"
    return (
        f"tasks in a seeded random order per cell (seed {seed} and the cell's model and "
        "domain; the run was not sequential)"
    )


def worded_summary(s: SequentialSummary, settings: Settings) -> SequentialSummary:
    """`s` with its words filled in where the analysis left them empty."""
    update = {}
    if not s.order and s.ordered_by is not None:
        update["order"] = order_text(s.ordered_by, settings.seed)
    if not s.design:
        update["design"] = describe(design_for(settings))
    return s.model_copy(update=update) if update else s


def study_text(s: SequentialSummary, settings: Settings) -> str:
    """The whole study's saving, in one sentence."""
    s = worded_summary(s, settings)
    return (
        f"sequential reading: {s.tasks} of {s.tasks_available} paired tasks and {s.episodes} "
        f"of {s.episodes_available} episodes ({100 * s.saving:.0f}% saved); {s.order}"
    )


def decided_text(c: SequentialComparison) -> str:
    """'visible damage, decided after 16 of 114 tasks' (or 'inconclusive after all 114')."""
    if c.decided:
        which = f" ({', '.join(c.amplified_channels)})" if c.amplified_channels else ""
        return f"{c.verdict}{which}, decided after {c.tasks} of {c.tasks_available} tasks"
    if c.more_tasks and c.tasks == 0:
        first = f" (the first at {c.first_look} tasks)" if c.first_look else ""
        return f"open: no planned look yet{first}; the planned looks allow {c.more_tasks} more"
    if c.more_tasks:
        return f"open after {c.tasks} tasks: the planned looks allow {c.more_tasks} more"
    return f"{c.verdict}: undecided after all {c.tasks_available} tasks"


def sequential_line(c: SequentialComparison) -> str:
    """The decision (`decided_text`), with the gap at the stop beside an early one."""
    gap = stop_gap_text(c)
    return decided_text(c) + (f"; {gap}" if gap else "")


def after_stop_sentences(c: SequentialComparison) -> list[str]:
    """What the HTML's headline adds for a comparison decided before its maximum: its
    sequential line, and the conditional-on-stopping label where the run stopped (none
    otherwise)."""
    if c.after_stop is None:
        return []
    label = conditional_text(c)
    return [f"Sequential: {sequential_line(c)}.", *([label] if label else [])]


def stop_gap_text(c: SequentialComparison) -> str:
    """'gap at the stop: +31.7 points, repeated 95% CI [+7.9, +54.1] (accounts for
    stopping)' beside a comparison decided before its maximum; "" otherwise."""
    a = c.after_stop
    if a is None:
        return ""
    return (
        f"gap at the stop: {signed_pts(a.gap)} points, repeated {100 * a.confidence:g}% CI"
        f"{signed_ci_pts(a.ci_low, a.ci_high)} (accounts for stopping)"
    )


LEANS: dict[str, str] = {
    "visible damage": "the gap away from 0",
    "flat score, amplified failures": "the gap towards 0, the failed-call ratios away from ×1",
    "no damage detected": "the gap towards 0, the failed-call ratios towards ×1",
}
"""Which way a stop's fixed-design estimates lean, by the verdict that stopped it: a stop
comes when the deciding statistics cross their boundaries, so the sample it leaves reads
them past those boundaries (damage: a large gap; a flat score: a small one)."""


def conditional_text(c: SequentialComparison) -> str:
    """The label of a comparison the run itself stopped early, as a sentence: its
    fixed-design numbers rest on the tasks read before the stop, and lean the way the stop
    went; "" otherwise."""
    a = c.after_stop
    if a is None or a.fixed_design != "conditional on stopping":
        return ""
    lean = LEANS.get(c.verdict)
    return (
        "The fixed-design estimates of this comparison are conditional on stopping (computed "
        "on the tasks the run read before it stopped)"
        + (f", so they lean the way the stop went: {lean}" if lean else "")
        + "."
    )


def coupling_source(pair: CoupledPair | None) -> str:
    """Where the pilot's coupling was estimated (none: independent trials, c = 0)."""
    if pair is None:
        return "no arm beside the reference in the pilot: independent trials"
    return f"{pair.arm} against {pair.reference} in {pair.model} / {pair.domain}"
