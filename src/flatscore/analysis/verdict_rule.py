"""The one verdict rule: `analyze`, `report` and `gate` all decide with `decide` (docs/
analysis.md, "Verdict"; docs/gate.md).

Every budget test below uses one statistic (`paired_score`), so the test, the interval and
TOST agree. "A drop beyond the margin is ruled out" is the upper half of TOST: the one-sided
test at alpha, i.e. the upper end of the (1 − 2·alpha) interval lies below the margin. (The
rule once read the 95% interval's upper end instead; TOST reads the 90% one, so a comparison
could be TOST-equivalent in the table and "inconclusive: the interval still allows a drop
beyond the margin" in the sentence beside it, while `gate` passed it.)

In order, for one arm against its reference:

1. **visible damage**: a significant (corrected) success drop at the default budget that is
   not bounded inside the margin;
2. **flat score, amplified failures**: otherwise, all failed calls or some channel amplified
   (corrected test), a significant drop not bounded by the margin at the tight budget, or
   the gap growing significantly at small K;
3. **inconclusive**: otherwise, a drop beyond the margin not significant, a drop beyond the
   margin not ruled out at a tested budget, a channel new in the arm that no test covers, or
   too few paired tasks to test the channels;
4. **no damage detected**: none of these.

`gate` maps 1 and 2 to damage (exit 3), 3 to inconclusive (4), 4 to pass (0): `GATE_OF`.
A significant drop that TOST bounds inside the margin is the tolerance the user set: it is
named in the reason, and does not by itself make damage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from flatscore.analysis.outputs import AnalysisModel
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
    return f"{100 * x:{'+' if signed else ''}.1f} points"


def _ci(b: BudgetTest) -> str:
    if b.ci_low is None or b.ci_high is None:
        return "no interval"
    return f"95% CI {100 * b.ci_low:+.1f} to {100 * b.ci_high:+.1f} points"


def _p(b: BudgetTest) -> str:
    return p_is(b.p_adjusted, "adjusted p") if b.p_adjusted is not None else "no test"


def _drop(b: BudgetTest) -> bool:
    """A significant drop that the margin does not bound."""
    return b.significant and (b.gap or 0.0) > 0 and not b.drop_ruled_out


def decide(e: Evidence) -> Decision:
    """The verdict and the numbers that decided it (see the module docstring)."""
    d = e.budgets[0]
    gap = d.gap or 0.0
    m = points(e.margin, signed=False)
    tail = f"; {e.shift}" if e.shift else ""
    if _drop(d):
        return Decision(
            "visible damage",
            f"significant success drop at the default K = {d.K}: {points(gap)} ({_ci(d)}, "
            f"{_p(d)}); a drop beyond ±{m} is not ruled out",
        )
    if d.significant and gap > 0:
        significance = f"a significant drop inside the ±{m} margin ({_ci(d)}, {_p(d)})"
    elif d.significant:
        significance = f"a significant gain ({_ci(d)}, {_p(d)})"
    else:
        tost = (
            f"equivalent within ±{m} (TOST)"
            if d.equivalent
            else f"equivalence within ±{m} not shown (TOST {p_is(d.tost_p)})"
        )
        significance = f"not significant ({_ci(d)}, {_p(d)}); {tost}"
    head = f"success difference at K = {d.K} {points(gap)}, {significance}"
    reasons = list(e.failure_reasons)
    reasons += [
        f"significant success drop at the tight K = {b.K}: {points(b.gap or 0.0)} "
        f"({_ci(b)}, {_p(b)})"
        for b in e.budgets[1:]
        if _drop(b)
    ]
    if e.gap_growth:
        reasons.append(e.gap_growth)
    if reasons:
        return Decision("flat score, amplified failures", f"{head}; " + "; ".join(reasons) + tail)
    undecided = []
    if not d.significant and gap > e.margin:
        undecided.append(f"the drop is beyond ±{m} but not significant: too few tasks to tell")
    for b in e.budgets:
        if not b.drop_ruled_out and not (b is d and undecided):
            bound = (
                ""
                if b.drop_bound is None
                else f" (the one-sided bound reaches {points(b.drop_bound)})"
            )
            undecided.append(f"a drop beyond ±{m} at K = {b.K} is not ruled out{bound}")
    if e.new_channels:
        undecided.append(
            "channel(s) new in the arm, with no ratio to test: "
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
    ks = " and ".join(
        f"K = {b.K}"
        + ("" if b.drop_bound is None else f" (one-sided bound {points(b.drop_bound)})")
        for b in e.budgets
    )
    return Decision(
        "no damage detected",
        f"{head}; a drop beyond ±{m} is ruled out at {ks}; no channel amplified, "
        f"no gap growth at small K{tail}",
    )
