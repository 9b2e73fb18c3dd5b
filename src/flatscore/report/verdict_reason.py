"""The verdict's reason in words (docs/analysis.md, "Verdict"): what the one rule
(`analysis.verdict_rule.decide`) found, said with the numbers behind it — the default
budget's success difference, its interval, test and the drop bound; the amplified failures;
what leaves a comparison undecided; and, appended, failures that moved between channels.
The analysis decides and keeps the data; analysis.json's `verdict_reason` and the gate's
`reason` are these words (`analysis_text.worded`, `gate_text.worded_gate`)."""

from __future__ import annotations

from flatscore.analysis.channels import LEAF_CHANNELS
from flatscore.analysis.comparison import evidence
from flatscore.analysis.result import ChannelAmplification, Comparison
from flatscore.analysis.settings import AnalysisSettings, in_points
from flatscore.analysis.stats import p_is, points
from flatscore.analysis.verdict_rule import BudgetTest, Clause, Decision, Evidence, Head, decide


def times(a: ChannelAmplification) -> str:
    """'×1.27 [unadjusted 95% CI 1.08, 1.49]' (the interval left out when there is none);
    a channel with no ratio: 'new: 0 → 96 calls'; the sign test's task counts where it was
    the test."""
    text = f"×{a.ratio:.2f}" if a.ratio is not None else f"new: 0 → {a.count_arm} calls"
    if a.ci_low is not None and a.ci_high is not None:
        text += f" [unadjusted 95% CI {a.ci_low:.2f}, {a.ci_high:.2f}]"
    if a.test == "task_sign":
        text += (
            f" (exact sign test over tasks: {a.tasks_arm_only} task(s) only in the arm, "
            f"{a.tasks_ref_only} only in the reference)"
        )
    return text


def _adj(a: ChannelAmplification) -> str:
    return p_is(a.p_adjusted, "adjusted p") if a.p_adjusted is not None else "no test"


def _changed(a: ChannelAmplification, alpha: float) -> bool:
    return a.p_adjusted is not None and a.p_adjusted < alpha


def channel_shift(c: Comparison, alpha: float) -> str | None:
    """'failures moved between channels: …' when some leaf channel changed significantly
    (corrected, either direction) while all failed calls together did not rise; None
    otherwise. Each side lists its significant channels, or else its largest point move
    marked not significant."""
    total = c.failed_calls
    if total is None or total.amplified:
        return None
    amp = {ch: amp for ch, amp in c.channel_amplification.items() if ch in LEAF_CHANNELS}
    moved = {ch for ch, a in amp.items() if _changed(a, alpha)}
    if not moved:
        return None

    def side(up: bool) -> str:
        chs = [
            ch
            for ch, a in amp.items()
            if a.ratio is not None and a.ratio != 1 and (a.ratio > 1) == up and a.p_value
        ]
        sig = [ch for ch in chs if ch in moved]
        if sig:
            return ", ".join(f"{ch} {times(amp[ch])} ({_adj(amp[ch])})" for ch in sig)
        if not chs:
            return "none"
        most = max(chs, key=lambda ch: abs(amp[ch].count_arm - amp[ch].count_ref))
        return f"{most} {times(amp[most])} (not significant, {_adj(amp[most])})"

    return (
        f"failures moved between channels: up {side(True)}; down {side(False)}; "
        f"all failed calls {times(total)} ({_adj(total)}), not more in total"
    )


def _ci(b: BudgetTest) -> str:
    if b.ci_low is None or b.ci_high is None:
        return "no interval"
    low, high = (round(100 * v, 1) + 0.0 for v in (b.ci_low, b.ci_high))  # no -0.0
    return f"unadjusted 95% CI {low:+.1f} to {high:+.1f} points"


def _p(b: BudgetTest) -> str:
    return p_is(b.p_adjusted, "adjusted p") if b.p_adjusted is not None else "no test"


def _bound(b: BudgetTest, alpha: float) -> str:
    """TOST's upper test in words: the upper end of the (1 − 2·alpha) interval."""
    if b.drop_bound is None:
        return "no interval"
    return f"the {100 * (1 - 2 * alpha):g}% interval's upper end {points(b.drop_bound)}"


def beyond_words(b: BudgetTest, e: Evidence) -> str:
    """A significant drop against the margin, in the words its intervals allow: "shown"
    where even the 95% interval's lower end lies beyond the margin, else "not ruled out"."""
    m = points(e.margin, signed=False)
    if b.ci_low is not None and b.ci_low > e.margin:
        return f"a drop beyond ±{m} is shown (the 95% interval's lower end {points(b.ci_low)})"
    return f"a drop beyond ±{m} is not ruled out ({_bound(b, e.alpha)})"


def _head(head: Head, d: BudgetTest, e: Evidence) -> str:
    """The default budget's success difference, its test and TOST in one clause."""
    gap = d.gap or 0.0
    m = points(e.margin, signed=False)
    at = f"success difference at K = {d.K}"
    if head == "drop inside the margin":
        return (
            f"{at}: a significant {100 * gap:.1f}-point drop, inside the "
            f"±{in_points(e.margin):.1f}-point margin ({_ci(d)}, {_p(d)}; {_bound(d, e.alpha)})"
        )
    if head == "gain":
        return f"{at} {points(gap)}: a significant gain ({_ci(d)}, {_p(d)})"
    text = f"{at} {points(gap)}, not significant ({_ci(d)}, {_p(d)})"
    if head == "equivalent":
        return f"{text}; equivalent within ±{m} (TOST {p_is(d.tost_p)})"
    if head == "drop ruled out":
        return f"{text}; a drop beyond ±{m} is ruled out ({_bound(d, e.alpha)})"
    return text


def _amplified(clause: Clause, e: Evidence, c: Comparison | None) -> str:
    b = clause.test
    if clause.kind == "tight drop" and b is not None:
        return (
            f"significant success drop at the tight K = {b.K}: {points(b.gap or 0.0)} "
            f"({_ci(b)}, {_p(b)}; {_bound(b, e.alpha)})"
        )
    assert c is not None, "amplified failures are worded from their comparison"
    if clause.kind == "more failed calls" and c.failed_calls is not None:
        return f"more failed calls overall: {times(c.failed_calls)} ({_adj(c.failed_calls)})"
    if clause.kind == "amplified channels":
        amp = c.channel_amplification
        return "amplified channel(s): " + ", ".join(
            f"{ch} {times(amp[ch])} ({_adj(amp[ch])})" for ch in e.amplified_channels
        )
    g = c.gap_growth.value
    assert clause.kind == "gap growth" and g is not None
    return f"gap grows at K={c.gap_amplification.k_small} ({points(g)})"


def _undecided(clause: Clause, decision: Decision, c: Comparison | None) -> str:
    e, b = decision.evidence, clause.test
    m = points(e.margin, signed=False)
    if clause.kind == "too few tasks":
        return f"the drop is beyond ±{m} but not significant: too few tasks to tell"
    if clause.kind == "not ruled out" and b is not None:
        return f"a drop beyond ±{m} at K = {b.K} is not ruled out ({_bound(b, e.alpha)})"
    if clause.kind == "not flat":
        return "amplified failures, with a score not shown flat: " + "; ".join(
            _amplified(a, e, c) for a in decision.amplified
        )
    if clause.kind == "tight not ruled out" and b is not None:
        return f"a drop beyond ±{m} at the tight K = {b.K} is not ruled out ({_bound(b, e.alpha)})"
    if clause.kind == "new channels":
        return "channel(s) new in the arm, with no test at this study size: " + ", ".join(
            f"{ch} ({n} failed calls, none in the reference)" for ch, n in e.new_channels.items()
        )
    assert clause.kind == "channels not tested"
    return (
        f"channels not tested: {e.paired_tasks} paired task(s), their intervals need "
        f"≥ {e.min_tasks}"
    )


def decision_words(decision: Decision, c: Comparison | None = None) -> str:
    """The decision in one reason; `c`, the comparison it was read from, gives the numbers
    of amplified failures and the failures that moved between channels (appended)."""
    e = decision.evidence
    d = e.budgets[0]
    shift = channel_shift(c, e.alpha) if c is not None else None
    tail = f"; {shift}" if shift else ""
    if decision.head is None:  # visible damage
        return (
            f"significant success drop at the default K = {d.K}: {points(d.gap or 0.0)} "
            f"({_ci(d)}, {_p(d)}); {beyond_words(d, e)}{tail}"
        )
    head = _head(decision.head, d, e)
    if decision.verdict == "flat score, amplified failures":
        return f"{head}; " + "; ".join(_amplified(a, e, c) for a in decision.amplified) + tail
    if decision.verdict == "inconclusive":
        return (
            f"{head}: " + "; ".join(_undecided(u, decision, c) for u in decision.undecided) + tail
        )
    m = points(e.margin, signed=False)
    tight = "".join(
        f"; at the tight K = {b.K} {points(b.gap or 0.0)}, a drop beyond ±{m} ruled out "
        f"({_bound(b, e.alpha)})"
        for b in e.budgets[1:]
    )
    return f"{head}{tight}; no channel amplified, no gap growth at small K{tail}"


def reason(c: Comparison, settings: AnalysisSettings, channels: list[str] | None = None) -> str:
    """The comparison's verdict in words, decided again by the one rule from its numbers
    (`channels`: the gate's `--channels`)."""
    return decision_words(decide(evidence(c, settings, channels)), c)
