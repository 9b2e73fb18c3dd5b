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

`decide` returns the verdict and what decided it, as data (`Decision`: the default budget's
result, and the clauses that made the verdict); the reason in words is the report's
(`flatscore.report.verdict_reason`).

The sequential rule (`sequential`) reads the same way: damage or equivalence, whichever is
decided, and a flat score stops as "amplified failures" only with amplification decided.
`gate` maps 1 and 2 to damage (exit 3), 3 to inconclusive (4), 4 to pass (0): `GATE_OF`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from flatscore.analysis.outputs import AnalysisModel

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
    more_failed_calls: bool = False
    """All failed calls amplified (corrected test); not counted under the gate's `--channels`."""
    amplified_channels: list[str] = field(default_factory=list)
    """Channels amplified (corrected test), those of `--channels` only where the gate names some."""
    gap_grows: bool = False
    """Gap(K_small) − Gap(K_default) significantly above 0."""
    new_channels: dict[str, int] = field(default_factory=dict)
    """Channels the reference never failed in and the arm did, with no test: failed calls."""
    paired_tasks: int = 0
    min_tasks: int = 0
    """Paired tasks the channel intervals need (`bootstrap_min_tasks`)."""


Head = Literal["drop inside the margin", "gain", "equivalent", "drop ruled out", "not significant"]
"""What the default budget's success difference shows, where it is not visible damage."""

ClauseKind = Literal[
    # amplified failures
    "more failed calls",
    "amplified channels",
    "tight drop",
    "gap growth",
    # what leaves a comparison undecided
    "too few tasks",
    "not ruled out",
    "not flat",
    "tight not ruled out",
    "new channels",
    "channels not tested",
]


@dataclass(frozen=True)
class Clause:
    """One finding of the rule; `test`: the budget it is about, where it is about one."""

    kind: ClauseKind
    test: BudgetTest | None = None


@dataclass(frozen=True)
class Decision:
    """The verdict and what decided it: the default budget's result (`head`; None for visible
    damage), the amplified failures, and what leaves the comparison undecided."""

    verdict: Verdict
    evidence: Evidence
    head: Head | None = None
    amplified: tuple[Clause, ...] = ()
    undecided: tuple[Clause, ...] = ()

    @property
    def gate(self) -> GateVerdict:
        return GATE_OF[self.verdict]


def _beyond(b: BudgetTest) -> bool:
    """A significant drop whose drop beyond the margin is not ruled out."""
    return b.significant and (b.gap or 0.0) > 0 and not b.drop_ruled_out


def _head(d: BudgetTest) -> Head:
    """The default budget's success difference, its test and TOST."""
    gap = d.gap or 0.0
    if d.significant and gap > 0 and d.drop_ruled_out:
        return "drop inside the margin"
    if d.significant and gap < 0:
        return "gain"
    if d.equivalent:
        return "equivalent"
    if d.drop_ruled_out:
        return "drop ruled out"
    return "not significant"


def decide(e: Evidence) -> Decision:
    """The verdict and the findings that decided it (see the module docstring)."""
    d = e.budgets[0]
    gap = d.gap or 0.0
    if _beyond(d):
        return Decision("visible damage", e)
    amplified = [Clause("more failed calls")] if e.more_failed_calls else []
    if e.amplified_channels:
        amplified.append(Clause("amplified channels"))
    amplified += [Clause("tight drop", b) for b in e.budgets[1:] if _beyond(b)]
    if e.gap_grows:
        amplified.append(Clause("gap growth"))
    if d.drop_ruled_out and amplified:
        return Decision("flat score, amplified failures", e, _head(d), tuple(amplified))
    undecided = []
    if not d.drop_ruled_out:
        if not d.significant and gap > e.margin:
            undecided.append(Clause("too few tasks"))
        else:
            undecided.append(Clause("not ruled out", d))
        if amplified:
            undecided.append(Clause("not flat"))
    undecided += [
        Clause("tight not ruled out", b)
        for b in e.budgets[1:]
        if not b.drop_ruled_out and not _beyond(b)
    ]
    if e.new_channels:
        undecided.append(Clause("new channels"))
    if e.paired_tasks < e.min_tasks:
        undecided.append(Clause("channels not tested"))
    if undecided:
        return Decision("inconclusive", e, _head(d), tuple(amplified), tuple(undecided))
    return Decision("no damage detected", e, _head(d))
