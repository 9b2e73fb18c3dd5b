"""The sequential reading in words (`analyze --sequential`; docs/analysis.md, "Sequential
verdicts"): the design, the order tasks were read in, each comparison's decision and the
study's saving. The analysis holds them as data (`SequentialSummary.ordered_by`,
`SequentialComparison`, the settings)."""

from __future__ import annotations

from flatscore.analysis.result import Settings
from flatscore.analysis.sequential import SequentialDesign
from flatscore.analysis.sequential_replay import design_for
from flatscore.analysis.sequential_result import SequentialComparison, SequentialSummary, TaskOrder
from flatscore.analysis.settings import in_points


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
