"""Why a number or a bound is missing, and how the intervals were made, in words: the notes
beside a comparison's channel ratios, gap amplification, Spearman ρ and bootstrap intervals,
and its `interval_method`. The analysis keeps the reasons as data (`outputs.NoteCode` beside
each note, the paired task count, the settings); `analysis_text.worded` fills the words in."""

from __future__ import annotations

from flatscore.analysis.outputs import Interval, NoteCode
from flatscore.analysis.paired_score import DISCORDANT_MIN
from flatscore.analysis.result import (
    ChannelAmplification,
    Comparison,
    GapAmplification,
    GapPoint,
)
from flatscore.analysis.settings import AnalysisSettings
from flatscore.analysis.stats import points

PAIRED_INTERVAL = (
    "success differences: paired score interval on per-task differences (tasks are clusters, "
    "trials averaged within a task, task-weighted; variance under the empirical-likelihood "
    "distribution restricted to each hypothesised difference, t(n − 1)), or Tango's score "
    f"interval when fewer than {DISCORDANT_MIN} tasks are discordant or all differences are "
    "equal"
)
"""How every success difference's interval is made (`analysis.paired_score`)."""

_FIXED: dict[NoteCode, str] = {
    "undefined": "undefined on these episodes",
    "no_failed_calls": "an arm has no failed agent calls",
    "no_agent_calls": "an arm has no agent tool calls",
    "no_failures": "no failures in this channel in either arm",
    "no_calls": "no agent tool calls",
    "no_spread": "no spread over tasks to test the ratio with",
    "unbounded": "the reference's failures sit in too few tasks to bound the ratio from above",
    "never_failed": "the arm never failed this way: no test of an increase",
    "equal_counts": "undefined: one arm's per-name counts are all equal",
}


def few_tasks(n: int, minimum: int) -> str:
    """Too few paired tasks for a bootstrap interval."""
    return f"{n} paired task(s): too few for a bootstrap interval (needs ≥ {minimum})"


def interval_method(paired_tasks: int, settings: AnalysisSettings) -> str:
    """How the comparison's intervals were made: the paired score interval, then the channel
    ratios' and the bootstrap's (or that there were too few tasks for a bootstrap)."""
    if paired_tasks < settings.bootstrap_min_tasks:
        rest = few_tasks(paired_tasks, settings.bootstrap_min_tasks)
    else:
        rest = (
            "channel ratios: task-clustered log rate ratio (jackknife, t); other "
            f"intervals: task bootstrap, {settings.bootstrap} resamples"
        )
    return f"{PAIRED_INTERVAL}; {rest}"


def note_words(code: NoteCode, c: Comparison, settings: AnalysisSettings) -> str:
    """One reason in words (the codes that need numbers beyond the comparison's own count
    are worded by their callers)."""
    if code == "few_tasks":
        return few_tasks(c.paired_tasks, settings.bootstrap_min_tasks)
    if code == "too_few_names":
        return (
            f"undefined: {c.hallucinated_names_union} hallucinated name(s) in the union (need ≥ 2)"
        )
    return _FIXED[code]


def channel_note(a: ChannelAmplification, c: Comparison, settings: AnalysisSettings) -> str | None:
    """Why a channel ratio has no value, interval or test (None: nothing is missing)."""
    said: list[str] = []
    for code in a.note_codes:
        if code == "new_in_arm":
            said.append(
                "new in the arm: the reference never failed this way, the arm did "
                f"{a.count_arm} time(s)"
            )
        elif code == "sign_test":
            said.append(
                f"exact sign test over tasks: {a.tasks_arm_only} task(s) only in the arm, "
                f"{a.tasks_ref_only} only in the reference"
            )
        else:
            said.append(note_words(code, c, settings))
    return "; ".join(said) or None


def gap_note(amp: GapAmplification, gaps: list[GapPoint]) -> str | None:
    """Why Gap(K_small) / Gap(K_default) is not given (None: it is); `gaps`, the
    comparison's Gap(K) for each K."""
    if amp.note_code is None:
        return None
    at = {g.K: g for g in gaps}
    small, default = at[amp.k_small], at[amp.k_default]
    if amp.note_code == "no_positive_gap":
        which = [
            f"Gap(K={g.K}) = {points(g.gap or 0.0)}" for g in (small, default) if (g.gap or 0) <= 0
        ]
        return f"{' and '.join(which)}: no positive gap to amplify (see gap_growth)"
    return (
        f"Gap(K={default.K}) = {points(default.gap or 0.0)} is not distinguishable from 0 (its "
        "interval includes 0): the ratio would divide by noise (see gap_growth)"
    )


def _interval(i: Interval, c: Comparison, settings: AnalysisSettings) -> Interval:
    if i.note is not None or i.note_code is None:
        return i
    return i.model_copy(update={"note": note_words(i.note_code, c, settings)})


def worded_notes(c: Comparison, settings: AnalysisSettings) -> Comparison:
    """`c` with its notes and `interval_method` in words, where the analysis left them
    empty (a comparison read back from analysis.json keeps its own)."""
    if c.interval_method:
        return c
    channels = {
        ch: a if a.note is not None else a.model_copy(update={"note": channel_note(a, c, settings)})
        for ch, a in c.channel_amplification.items()
    }
    failed = c.failed_calls
    if failed is not None and failed.note is None:
        failed = failed.model_copy(update={"note": channel_note(failed, c, settings)})
    amp = c.gap_amplification
    if amp.note is None:
        amp = amp.model_copy(update={"note": gap_note(amp, c.gap)})
    rho = c.spearman_note
    if rho is None and c.spearman_note_code is not None:
        rho = note_words(c.spearman_note_code, c, settings)
    return c.model_copy(
        update={
            "interval_method": interval_method(c.paired_tasks, settings),
            "channel_amplification": channels,
            "failed_calls": failed,
            "gap_amplification": amp,
            "spearman_note": rho,
            "trajectory_difference": {
                m: _interval(i, c, settings) for m, i in c.trajectory_difference.items()
            },
            "recovery_difference": _interval(c.recovery_difference, c, settings),
            "repeat_difference": c.repeat_difference
            and _interval(c.repeat_difference, c, settings),
            "reissue_difference": c.reissue_difference
            and _interval(c.reissue_difference, c, settings),
            "gap_growth": _interval(c.gap_growth, c, settings),
        }
    )
