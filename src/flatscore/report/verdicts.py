"""Headline verdicts in words a deployer understands, from the analysis numbers alone.

The analysis decides the verdict label; this module only explains it: what the score does at
the default error budget, what happens to failed calls, what a tighter budget costs, and what
that means for deployment. Shared by the HTML report and summary.md so both say the same.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from flatscore.analysis.comparison import VERDICT_ORDER
from flatscore.analysis.result import (
    FLOOR_SE_REACH,
    ArmStats,
    Cell,
    ChannelAmplification,
    Comparison,
    FloorStat,
    GapPoint,
    Settings,
)
from flatscore.analysis.stats import format_p, p_is
from flatscore.report.verdict_reason import channel_shift

CHANNEL_WORDS: dict[str, str] = {
    "unknown_tool": "calling tools that do not exist",
    "role_confusion": "calling the user's tools instead of its own (role confusion)",
    "near_miss": "calling misspelt variants of its own tools (near misses)",
    "invented": "calling invented tool names",
    "not_a_name": "typing text or argument values where a tool name goes",
    "bad_arguments": "sending malformed or invalid arguments",
    "entity_not_found": "asking for records that do not exist",
    "precondition": "attempting actions a domain rule refuses",
    "other": "other tool errors",
    "malformed_output": "output that could not be parsed at all",
}

TONE: dict[str, str] = {
    "flat score, amplified failures": "warn",
    "visible damage": "bad",
    "inconclusive": "warn",
    "no damage detected": "ok",
    "nothing to compare": "warn",
}

ADVICE: dict[str, str] = {
    "flat score, amplified failures": (
        "The headline score hides the damage: if your deployment stops, escalates or bills "
        "after a few failed tool calls, expect the lower success shown at small budgets."
    ),
    "visible damage": (
        "The final score itself drops: do not ship this arm as a drop-in replacement."
    ),
    "inconclusive": (
        "This study is too small to tell: its interval still allows a drop beyond the "
        "equivalence margin. Add tasks or trials (`flatscore power` sizes the study) before "
        "deciding."
    ),
    "no damage detected": (
        "No damage is visible, and the one-sided test rules out a drop beyond the equivalence "
        "margin at every budget tested; `flatscore power` says how small a gap this study "
        "could have detected."
    ),
    "nothing to compare": "Only one arm was run: there is nothing to compare it with.",
}
DAMAGE_WITHIN_MARGIN = (
    "The final score drops significantly, but by less than the equivalence margin (TOST): "
    "decide whether a drop of this size matters for your deployment before shipping."
)
"""The "no damage detected" advice when the drop is significant yet bounded inside the margin."""
AMPLIFIED_NOT_FLAT = (
    "Failed tool calls are amplified, but this study cannot yet show the final score flat "
    "(a drop beyond the equivalence margin is not ruled out): treat the arm as damaged until "
    "more tasks or trials decide (`flatscore power` sizes the study)."
)
"""The "inconclusive" advice when failures are amplified beside a score not shown flat."""
CHANNELS_UNDECIDED = (
    "The score cannot be told apart yet on the failure channels: a channel is new in the arm "
    "with no test, or there are too few tasks to test channels. Add tasks or trials "
    "(`flatscore power` sizes the study) before deciding."
)
"""The "inconclusive" advice when the success gap is bounded but the channels are not."""
AMPLIFIED_FLAT_BUDGET = (
    "The headline score hides extra failed tool calls (each costs turns, tokens and tool "
    "traffic), though success at small budgets is not significantly lower in this study."
)
"""The "flat score, amplified failures" advice when only channels, not the gap, grew: the
small-budget sentence needs Gap(K_small) − Gap(K_default) significantly above 0."""


def gap_grows(c: Comparison) -> bool:
    """Success is lower at a small budget: Gap(K_small) exceeds Gap(K_default) by a
    significant margin (the growth interval), or the tight budget's drop is significant and
    not bounded by the margin (the verdict rule's two small-budget findings)."""
    if c.gap_growth.ci_low is not None and c.gap_growth.ci_low > 0:
        return True
    return any(
        t.significant and (t.gap or 0) > 0 and not t.drop_ruled_out for t in c.budget_tests[1:]
    )


def drop_ruled_out(c: Comparison) -> bool:
    """A drop beyond the margin is ruled out at every budget the verdict tested."""
    tests = c.budget_tests
    return all(t.drop_ruled_out for t in tests) if tests else c.tost_equivalent


def advice(c: Comparison) -> str:
    """The deployment advice for the verdict; each claim only where it holds."""
    if c.verdict == "flat score, amplified failures" and not gap_grows(c):
        return AMPLIFIED_FLAT_BUDGET
    if c.verdict == "no damage detected" and c.significant and (c.gap_default.gap or 0) > 0:
        return DAMAGE_WITHIN_MARGIN
    amplified = bool(c.amplified_channels) or (
        c.failed_calls is not None and c.failed_calls.amplified
    )
    if c.verdict == "inconclusive" and (amplified or gap_grows(c)):
        return AMPLIFIED_NOT_FLAT
    if c.verdict == "inconclusive" and drop_ruled_out(c):
        return CHANNELS_UNDECIDED
    return ADVICE.get(c.verdict or "", "")


SEQUENTIAL_UNBOUNDED = (
    "The fixed design rules out a drop beyond the margin on these tasks, but the sequential "
    "reading does not: its last look spends only what its earlier looks left, so its bound "
    "is stricter. Treat the arm as undecided until more tasks or trials decide."
)
"""The advice where the sequential reading ends "inconclusive" beside a flat score."""

SEQUENTIAL_OPEN = (
    "The sequential reading has not decided this comparison after {tasks} tasks; its "
    "planned looks allow {more} more. Treat it as undecided until they are read: the fixed "
    "design's verdict on the tasks so far is named beside it, and its error rates do not "
    "hold for a study that stops when a statistic crosses a boundary."
)
"""The advice where a sequential run's comparison is still open."""


def lead_verdict(c: Comparison) -> tuple[str, str]:
    """(the verdict to act on, the fixed design's where it differs). The sequential verdict
    of a run that stopped sequentially is the study's decision (its error rates hold over
    every look): decided, undecided at its maximum, or "inconclusive" while still open (the
    gate says the same); the replay of a fixed-design run leaves the fixed design's verdict
    in the lead (a what-if must not overwrite the study's verdict)."""
    fixed = str(c.verdict or "")
    s = c.sequential
    if s is None or not sequential_leads(c):
        return fixed, ""
    return (fixed, "") if s.verdict == fixed else (s.verdict, fixed)


def sequential_leads(c: Comparison) -> bool:
    """The sequential verdict is the study's (`lead_verdict`): the run stopped sequentially."""
    s = c.sequential
    return s is not None and s.ran_sequentially


FIXED_NOTE = "fixed design on the same tasks: {}"
"""What every surface says beside a sequential verdict that the fixed design's differs from."""


def verdict_text(c: Comparison) -> str:
    """The comparison's verdict as every surface shows it: the reading's verdict, with the
    other reading's named beside it where it differs ("inconclusive (fixed design on the
    same tasks: no damage detected)")."""
    verdict, fixed = lead_verdict(c)
    return f"{verdict} ({FIXED_NOTE.format(fixed)})" if fixed else verdict


def cell_verdict(cell: Cell) -> str:
    """The cell's verdict as every surface shows it: its worst comparison by the reading's
    verdicts (`lead_verdict`); a cell without comparisons keeps the analysis' verdict."""
    leads = [lead_verdict(c)[0] for c in cell.comparisons]
    known = [v for v in leads if v in VERDICT_ORDER]
    if not known:
        return str(cell.verdict)
    return min(known, key=VERDICT_ORDER.index)


def cell_reason(cell: Cell) -> str:
    """The cell's reason beside `cell_verdict`: the analysis' reason, and which comparison's
    sequential verdict leads where the reading's verdict differs from the fixed design's."""
    verdict = cell_verdict(cell)
    if verdict == cell.verdict:
        return cell.verdict_reason
    arms = [c.arm for c in cell.comparisons if lead_verdict(c)[0] == verdict]
    return (
        f"{', '.join(arms)}: {verdict}, read sequentially as the run stopped "
        f"({FIXED_NOTE.format(cell.verdict)}: {cell.verdict_reason})"
    )


def _lead_advice(c: Comparison, verdict: str) -> str:
    s = c.sequential
    if verdict == "inconclusive" and s is not None and s.more_tasks and sequential_leads(c):
        return SEQUENTIAL_OPEN.format(tasks=s.tasks, more=s.more_tasks)
    if verdict == c.verdict:
        return advice(c)
    if verdict == "inconclusive" and c.tost_equivalent:
        return SEQUENTIAL_UNBOUNDED
    return ADVICE.get(verdict, "")


@dataclass(frozen=True)
class Headline:
    """One arm's verdict against the reference, with the sentences that explain it."""

    cell: str
    arm: str
    reference: str
    verdict: str
    tone: str
    sentences: list[str]
    label: str = ""
    """"negative control (a replicate of ARM with another seed base)" for a control arm."""
    fixed_verdict: str = ""
    """The fixed design's verdict on the same tasks, where the sequential one (`verdict`)
    differs; the sentences are the fixed design's numbers either way."""

    @property
    def fixed_note(self) -> str:
        """What the summary, the HTML and the terminal say beside a differing verdict."""
        return FIXED_NOTE.format(self.fixed_verdict) if self.fixed_verdict else ""


def pts(value: float | None, digits: int = 1) -> str:
    """A fraction shown in percentage points ("not computed" when the analysis could not)."""
    if value is None:
        return "not computed"
    text = f"{100 * value:.{digits}f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text  # no "-0.0"


SIGN_CONVENTION = "reference − arm: positive where the arm does worse"
"""Every gap and difference flatscore prints (Gap(K), success and loop differences): the
reference's value minus the arm's, in every output (docs/analysis.md, glossary)."""


def signed_pts(value: float | None, digits: int = 1) -> str:
    """A difference in points with its sign (`+3.9`, `-1.5`; `0.0`, never `-0.0`); "—" when
    there is none."""
    if value is None:
        return "—"
    text = f"{100 * value:+.{digits}f}"
    return text[1:] if not text.strip("+-0.") else text


def signed_ci_pts(low: float | None, high: float | None, digits: int = 1) -> str:
    """' [-39.0, +39.0]' (points) for a difference's interval; nothing without one."""
    if low is None or high is None:
        return ""
    return f" [{signed_pts(low, digits)}, {signed_pts(high, digits)}]"


def pct(value: float | None, digits: int = 1) -> str:
    """A rate as a percentage ("not computed", never "n/a%")."""
    return "not computed" if value is None else f"{pts(value, digits)}%"


def ratio(value: float | None) -> str:
    return "no ratio" if value is None else f"×{value:.2f}"


def ci_ratio(low: float | None, high: float | None) -> str:
    if low is None:
        return "no interval at this study size"
    if high is None:
        return f"unadjusted 95% CI from {ratio(low)}, no upper bound"
    return f"unadjusted 95% CI {ratio(low)} to {ratio(high)}"


def ci_pts(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return "no interval"
    return f"unadjusted 95% CI {pts(low)} to {pts(high)} points"


REACH = f"{FLOOR_SE_REACH:g} standard errors"
"""How far past a signed noise floor an arm must lie to be called beyond it, in words."""


def floor_se(f: FloorStat) -> str | None:
    """A signed floor's standard error at the full trial count: "SE 0.9" (points); ratios
    "SE ×1.06", the factor it makes (the standard error is of the log)."""
    se = f.floor_full_trials_se
    if se is None:
        return None
    return f"SE ×{math.exp(se):.2f}" if f.kind == "ratio" else f"SE {pts(se)}"


def floor_size(f: FloorStat) -> str:
    """A signed noise floor at the full trial count with its standard error: "±1.4 points
    (SE 0.9)"; ratios "×1.22 (SE ×1.06)"."""
    size = (
        ratio(f.floor_full_trials) if f.kind == "ratio" else f"±{pts(f.floor_full_trials)} points"
    )
    se = floor_se(f)
    return size if se is None else f"{size} ({se})"


def gap_at(comparison: Comparison, k: int) -> GapPoint | None:
    return next((g for g in comparison.gap if k == g.K), None)


def arm_stats(cell: Cell, name: str) -> ArmStats | None:
    return next((a for a in cell.arms if a.arm == name), None)


def _failure_rate(arm: ArmStats | None) -> float | None:
    if arm is None or arm.agent_tool_calls == 0:
        return None
    return arm.failed_agent_calls / arm.agent_tool_calls


def _score_sentence(c: Comparison, settings: Settings) -> str:
    k_default, alpha = settings.default_K, settings.alpha
    g = c.gap_default
    base = (
        f"At the default budget (K = {k_default} failed calls), {c.arm} succeeds on "
        f"{pct(g.s_arm)} of tasks against {pct(g.s_ref)} for {c.reference} (task-weighted, "
        f"{c.paired_tasks} paired tasks; gap {pts(g.gap)} points, {ci_pts(g.ci_low, g.ci_high)})"
    )
    margin = settings.margin_text()
    bound = c.budget_tests[0].drop_bound if c.budget_tests else None
    one_sided = (
        "TOST's upper test"
        if bound is None
        else f"the {100 * (1 - 2 * alpha):g}% interval's upper end {pts(bound)} points"
    )
    if c.significant:
        tail = f"; the difference is significant after correction (adjusted {p_is(c.p_adjusted)})"
        if (g.gap or 0) > 0 and c.budget_tests and c.budget_tests[0].drop_ruled_out:
            tail += f", and a drop beyond {margin} is ruled out ({one_sided})"
        tail += "."
    elif c.tost_equivalent:
        tail = f"; the scores are equivalent within {margin} (TOST)."
    else:
        test = (
            "" if c.p_adjusted is None else f"not significant (adjusted {p_is(c.p_adjusted)}) and "
        )
        tail = f"; {test}equivalence within {margin} could not be shown"
        if c.budget_tests and c.budget_tests[0].drop_ruled_out:
            tail += f", though a drop beyond {margin} is ruled out ({one_sided})."
        else:
            tail += " (too few tasks or a real gap)."
    return base + tail


def _failure_sentence(cell: Cell, c: Comparison, alpha: float) -> str:
    ref, arm = arm_stats(cell, c.reference), arm_stats(cell, c.arm)
    rate_ref, rate_arm = _failure_rate(ref), _failure_rate(arm)
    n_arm = arm.failed_agent_calls if arm else 0
    n_ref = ref.failed_agent_calls if ref else 0
    text = (
        f"Failed tool calls: {pts(rate_arm)} per 100 agent calls against {pts(rate_ref)} "
        f"({n_arm} vs {n_ref} calls)."
    )
    total = c.failed_calls
    if total is not None and total.ratio is not None and total.ci_low is not None:
        text += (
            f" All failed calls together: {ratio(total.ratio)} "
            f"({ci_ratio(total.ci_low, total.ci_high)}, adjusted {p_is(total.p_adjusted)})"
            + (": more failure overall." if total.amplified else ", not significantly more.")
        )
    leaves = [ch for ch in c.amplified_channels if ch != "unknown_tool"] or c.amplified_channels
    if leaves:
        worst = max(
            leaves,
            key=lambda ch: (
                (c.channel_amplification[ch].count_arm - c.channel_amplification[ch].count_ref, ch)
                if ch in c.channel_amplification
                else (0, ch)
            ),
        )
        amp = c.channel_amplification.get(worst)
        if amp is not None:
            how = (
                f"{ratio(amp.ratio)}, {ci_ratio(amp.ci_low, amp.ci_high)}"
                if amp.test != "task_sign"
                else ("new in the arm" if amp.ratio is None else ratio(amp.ratio))
                + f"; {_sign(amp)}"
            )
            text += (
                f" The largest amplified channel is {CHANNEL_WORDS.get(worst, worst)}: "
                f"{pct(amp.rate_arm)} of calls vs {pct(amp.rate_ref)} ({how}, "
                f"adjusted {p_is(amp.p_adjusted)})."
            )
        shift = channel_shift(c, alpha)
        if shift:
            text += f" {shift[0].upper()}{shift[1:]}."
    elif c.paired_tasks and all(
        a.ci_low is None for a in c.channel_amplification.values() if a.ratio is not None
    ):
        text += " Too few tasks to test channel amplification."
    else:
        text += " No channel is significantly amplified."
        shift = channel_shift(c, alpha)
        if shift:
            text += f" {shift[0].upper()}{shift[1:]}."
    new = [
        ch
        for ch, a in c.channel_amplification.items()
        if a.count_ref == 0 and a.count_arm > 0 and ch != "unknown_tool"
    ]
    if new:
        amps = c.channel_amplification
        text += " New in the arm: " + "; ".join(
            f"{CHANNEL_WORDS.get(ch, ch)} "
            f"(new: 0 → {pct(amps[ch].rate_arm)}; {_new_test(amps[ch])})"
            for ch in new
        )
        text += "."
    names = _names_sentence(c)
    return f"{text} {names}" if names else text


def _sign(a: ChannelAmplification) -> str:
    return (
        f"exact sign test over tasks: {a.tasks_arm_only} task(s) only in the arm, "
        f"{a.tasks_ref_only} only in the reference"
    )


def _new_test(a: ChannelAmplification) -> str:
    """What the exact test says of a channel new in the arm."""
    if a.test != "task_sign" or a.p_value is None:
        return "not tested at this study size"
    verdict = "amplified" if a.amplified else "not significant"
    return f"{_sign(a)}, {verdict}, adjusted {p_is(a.p_adjusted)}"


def _rho(value: float | None) -> str:
    return "not defined" if value is None else f"{value:.2f}"


def _names_sentence(c: Comparison) -> str | None:
    """Are the arm's hallucinated names the reference's? Decided only against the noise
    floor (the reference's halves against each other), never on ρ alone."""
    if c.spearman_rho is None and c.novel_fraction is None:
        return None
    rho = (
        "ρ not defined" if c.spearman_rho is None else f"rank correlation ρ = {c.spearman_rho:.2f}"
    )
    novel = pct(c.novel_fraction)
    numbers = f"{rho}; {novel} of its hallucinated calls use a name the reference never produced"
    nf = c.noise_floor
    if nf is not None and nf.invariance_reason.startswith("untestable"):
        return f"Its hallucinated tool names: {numbers}; {nf.invariance_reason}."
    if nf is None or nf.invariance == "not decided":
        return (
            f"Its hallucinated tool names: {numbers}; no noise floor to judge them against "
            "(it needs ≥ 2 trials per task and enough paired tasks)."
        )
    fr, fn = nf.diagnostics["spearman_rho"], nf.diagnostics["novel_fraction"]
    floor = (
        f"the reference against itself, at half the trials: ρ = {_rho(fr.floor)}, "
        f"{pct(fn.floor)} novel; the arm at the same size: ρ = {_rho(fr.arm_half)}, "
        f"{pct(fn.arm_half)} novel"
    )
    if nf.invariance == "beyond the noise floor":
        return (
            "Its hallucinated tool names differ from the reference's more than the "
            f"reference's own runs differ from each other ({numbers}; {floor})."
        )
    return (
        "Its hallucinated tool names show no change beyond what the reference's own runs "
        f"show between themselves ({numbers}; {floor}): none detected, which with few "
        "names is not evidence of none."
    )


def _loop_sentence(cell: Cell, c: Comparison) -> str | None:
    """Loops: the arm's repeat and re-issue shares beside the reference's, the difference
    with its (unadjusted) interval and the reference's own noise floor."""
    ref, arm = arm_stats(cell, c.reference), arm_stats(cell, c.arm)
    if ref is None or arm is None or (arm.repeat_share is None and arm.reissue_share is None):
        return None
    floor = c.noise_floor.diagnostics if c.noise_floor else {}

    def part(what: str, mine: float | None, theirs: float | None, key: str, label: str) -> str:
        diff = getattr(c, key)
        text = f"{pct(mine)} {what} (against {pct(theirs)}"
        if diff is not None and diff.value is not None:
            text += f": {pts(diff.value)} points, {ci_pts(diff.ci_low, diff.ci_high)}"
        f = floor.get(key)
        if f is not None and f.floor_full_trials is not None:
            text += f"; the reference against itself: {floor_size(f)}"
            if f.beyond_full_trials():
                text += f", and the {label} difference exceeds that floor by more than {REACH}"
        return text + ")"

    return (
        "Loops: "
        + part(
            "of its failed calls repeat the call that had just failed",
            arm.repeat_share,
            ref.repeat_share,
            "repeat_difference",
            "repeat",
        )
        + "; "
        + part(
            "of its calls re-issue a call that already succeeded",
            arm.reissue_share,
            ref.reissue_share,
            "reissue_difference",
            "re-issue",
        )
        + "."
    )


def _budget_sentence(c: Comparison) -> str | None:
    amp = c.gap_amplification
    small = gap_at(c, amp.k_small)
    if small is None or amp.k_small == amp.k_default:
        return None
    text = (
        f"With a tight budget (K = {amp.k_small}), the gap is {pts(small.gap)} points "
        f"({ci_pts(small.ci_low, small.ci_high)})"
    )
    if amp.value is not None:
        text += f", {amp.value:.1f}× the gap at K = {amp.k_default}"
    floor = c.noise_floor.diagnostics.get(f"gap.K{amp.k_small}") if c.noise_floor else None
    if floor is not None and floor.floor_full_trials is not None:
        text += (
            f"; the reference against itself: {floor_size(floor)} at this budget (its noise floor)"
        )
        if floor.beyond_full_trials():
            text += f", and the gap exceeds that floor by more than {REACH}"
    return text + "."


def pval(value: float | None) -> str:
    """A p-value as people read it (the verdict reasons' format: `stats.format_p`)."""
    return format_p(value)


def headlines(cell: Cell, settings: Settings) -> list[Headline]:
    """One headline per arm compared with the cell's reference (the analysis' settings:
    its default K, and its alpha for the significance the sentences name)."""
    out = []
    for c in cell.comparisons:
        sentences = [
            _score_sentence(c, settings),
            _failure_sentence(cell, c, settings.alpha),
        ]
        loop = _loop_sentence(cell, c)
        if loop:
            sentences.append(loop)
        budget = _budget_sentence(c)
        if budget:
            sentences.append(budget)
        verdict, fixed = lead_verdict(c)
        sentences.append(_lead_advice(c, verdict))
        out.append(
            Headline(
                cell=f"{cell.model} · {cell.domain}",
                arm=c.arm,
                reference=c.reference,
                verdict=verdict,
                tone=TONE.get(verdict, "warn"),
                fixed_verdict=fixed,
                sentences=[s for s in sentences if s],
                label=(
                    f"negative control (a replicate of {c.control_of} with another seed base)"
                    if c.control_of
                    else ""
                ),
            )
        )
    return out
