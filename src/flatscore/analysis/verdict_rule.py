"""The one verdict rule: `analyze`, `report` and `gate` all decide with `decide` (docs/
analysis.md, "Verdict"; docs/gate.md).

Every budget test uses one statistic (`paired_score`), so the test, the interval and TOST
agree. Equivalence is TOST at alpha: the (1 − 2·alpha) interval (90% at alpha 0.05). "A drop
beyond the margin is ruled out" is TOST's upper test: the upper end of that interval lies
below the margin. The verdict asks about damage, so a possible *gain* beyond the margin does
not keep a comparison from "no damage detected" (two-sided TOST would call a negative control
whose interval reaches 7.6 points on the gain side inconclusive).

In order, for one arm against its reference:

1. **visible damage**: a significant (corrected) success drop at the default budget whose
   drop beyond the margin is not ruled out;
2. **flat score, amplified failures**: a drop beyond the margin ruled out at the default
   budget (a flat score), and amplified failures: all failed calls or some channel amplified
   (corrected), a significant drop beyond the margin at the tight budget, or the gap growing
   significantly at small K;
3. **inconclusive**: otherwise, when a drop beyond the margin is not ruled out at a tested
   budget (amplified failures beside it are named, not decided), a channel new in the arm has
   no test, or too few paired tasks test the channels;
4. **no damage detected**: none of these. A significant drop inside the margin is the
   tolerance the margin sets: the reason names it ("a significant 2.0-point drop, inside the
   ±7.5-point margin"), and it is not damage.

The sequential rule (`sequential`) reads the same way: damage or equivalence, whichever is
decided, and a flat score stops as "amplified failures" only with amplification decided.
`gate` maps 1 and 2 to damage (exit 3), 3 to inconclusive (4), 4 to pass (0): `GATE_OF`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from flatscore.analysis.outputs import AnalysisModel
from flatscore.analysis.settings import in_points
from flatscore.analysis.stats import p_is

Verdict = Literal[
    "flat score, amplified failures",
    "visible damage",
    "inconclusive",
    "no damage detected",
    "nothing to compare",
]
GateVerdict = Literal["pass", "damage", "inconclusive"]
GATE_OF: dict[Verdict, GateVerdict] = {
    "visible damage": "damage",
    "flat score, amplified failures": "damage",
    "inconclusive": "inconclusive",
    "no damage detected": "pass",
    "nothing to compare": "inconclusive",
}
"""The gate's verdict for each analysis verdict (one rule, two vocabularies)."""


class BudgetTest(AnalysisModel):
    """The paired success difference Gap(K) at one budget K and its tests, on one statistic:
    the 95% interval, the two-sided test (its study-wide corrected p decides `significant`),
    TOST within ±margin, and the one-sided test for a drop beyond the margin (`drop_bound`,
    the upper end of the (1 − 2·alpha) interval; `drop_ruled_out` when below the margin)."""

    K: int
    gap: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None = None
    p_adjusted: float | None = None
    significant: bool = False
    tost_p: float | None = None
    equivalent: bool = False
    drop_bound: float | None = None
    drop_ruled_out: bool = False


@dataclass(frozen=True)
class Evidence:
    """What the rule reads from one comparison (`comparison.evidence` builds it)."""

    margin: float
    alpha: float
    budgets: list[BudgetTest]
    """The default budget first, then the tight budget when it was tested."""
    failure_reasons: list[str] = field(default_factory=list)
    """Amplification findings: more failed calls overall, each amplified channel."""
    gap_growth: str | None = None
    """Set (the words) when Gap(K_small) − Gap(K_default) is significantly above 0."""
    new_channels: dict[str, int] = field(default_factory=dict)
    """Channels the reference never failed in and the arm did, with no test: failed calls."""
    paired_tasks: int = 0
    min_tasks: int = 0
    """Paired tasks the channel intervals need (`bootstrap_min_tasks`)."""
    shift: str | None = None
    """'failures moved between channels: …', appended to the reason."""


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    reason: str

    @property
    def gate(self) -> GateVerdict:
        return GATE_OF[self.verdict]


def points(x: float, signed: bool = True) -> str:
    """A difference of fractions, in points: 0.375 → '+37.5 points'."""
    return f"{round(100 * x, 1) + 0.0:{'+' if signed else ''}.1f} points"  # + 0.0: no -0.0


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


def _beyond(b: BudgetTest) -> bool:
    """A significant drop whose drop beyond the margin is not ruled out."""
    return b.significant and (b.gap or 0.0) > 0 and not b.drop_ruled_out


def _beyond_words(b: BudgetTest, e: Evidence) -> str:
    """A significant drop against the margin, in the words its intervals allow: "shown"
    where even the 95% interval's lower end lies beyond the margin, else "not ruled out"."""
    m = points(e.margin, signed=False)
    if b.ci_low is not None and b.ci_low > e.margin:
        return f"a drop beyond ±{m} is shown (the 95% interval's lower end {points(b.ci_low)})"
    return f"a drop beyond ±{m} is not ruled out ({_bound(b, e.alpha)})"


def _head(d: BudgetTest, e: Evidence) -> str:
    """The default budget's success difference, its test and TOST in one clause."""
    gap = d.gap or 0.0
    m = points(e.margin, signed=False)
    at = f"success difference at K = {d.K}"
    if d.significant and gap > 0 and d.drop_ruled_out:
        return (
            f"{at}: a significant {100 * gap:.1f}-point drop, inside the "
            f"±{in_points(e.margin):.1f}-point margin ({_ci(d)}, {_p(d)}; {_bound(d, e.alpha)})"
        )
    if d.significant and gap < 0:
        return f"{at} {points(gap)}: a significant gain ({_ci(d)}, {_p(d)})"
    head = f"{at} {points(gap)}, not significant ({_ci(d)}, {_p(d)})"
    if d.equivalent:
        return f"{head}; equivalent within ±{m} (TOST {p_is(d.tost_p)})"
    if d.drop_ruled_out:
        return f"{head}; a drop beyond ±{m} is ruled out ({_bound(d, e.alpha)})"
    return head


def decide(e: Evidence) -> Decision:
    """The verdict and the numbers that decided it (see the module docstring)."""
    d = e.budgets[0]
    gap = d.gap or 0.0
    m = points(e.margin, signed=False)
    tail = f"; {e.shift}" if e.shift else ""
    if _beyond(d):
        return Decision(
            "visible damage",
            f"significant success drop at the default K = {d.K}: {points(gap)} ({_ci(d)}, "
            f"{_p(d)}); {_beyond_words(d, e)}{tail}",
        )
    head = _head(d, e)
    amplified = list(e.failure_reasons)
    amplified += [
        f"significant success drop at the tight K = {b.K}: {points(b.gap or 0.0)} "
        f"({_ci(b)}, {_p(b)}; {_bound(b, e.alpha)})"
        for b in e.budgets[1:]
        if _beyond(b)
    ]
    if e.gap_growth:
        amplified.append(e.gap_growth)
    if d.drop_ruled_out and amplified:
        return Decision("flat score, amplified failures", f"{head}; " + "; ".join(amplified) + tail)
    undecided = []
    if not d.drop_ruled_out:
        if not d.significant and gap > e.margin:
            undecided.append(f"the drop is beyond ±{m} but not significant: too few tasks to tell")
        else:
            undecided.append(
                f"a drop beyond ±{m} at K = {d.K} is not ruled out ({_bound(d, e.alpha)})"
            )
        if amplified:
            undecided.append(
                "amplified failures, with a score not shown flat: " + "; ".join(amplified)
            )
    undecided += [
        f"a drop beyond ±{m} at the tight K = {b.K} is not ruled out ({_bound(b, e.alpha)})"
        for b in e.budgets[1:]
        if not b.drop_ruled_out and not _beyond(b)
    ]
    if e.new_channels:
        undecided.append(
            "channel(s) new in the arm, with no test at this study size: "
            + ", ".join(
                f"{ch} ({n} failed calls, none in the reference)"
                for ch, n in e.new_channels.items()
            )
        )
    if e.paired_tasks < e.min_tasks:
        undecided.append(
            f"channels not tested: {e.paired_tasks} paired task(s), their intervals need "
            f"≥ {e.min_tasks}"
        )
    if undecided:
        return Decision("inconclusive", f"{head}: " + "; ".join(undecided) + tail)
    tight = "".join(
        f"; at the tight K = {b.K} {points(b.gap or 0.0)}, a drop beyond ±{m} ruled out "
        f"({_bound(b, e.alpha)})"
        for b in e.budgets[1:]
    )
    return Decision(
        "no damage detected",
        f"{head}{tight}; no channel amplified, no gap growth at small K{tail}",
    )
