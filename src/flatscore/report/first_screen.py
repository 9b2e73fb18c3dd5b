"""The first screen of every report.html: each comparison's verdict in one line with where it
was decided (the look's paired tasks for a sequential run, the tasks read for a fixed design),
what a sequential run saved against the fixed design, and where a flat score hides amplified
failures, its S(K) at the default budget and at K = 0.

The verdicts are `verdicts.lead_verdict`'s (the one wording every surface shows); nothing
here computes a statistic: it reads the analysis.
"""

from __future__ import annotations

from pydantic import BaseModel

from flatscore.analysis.result import AnalysisResult, Comparison
from flatscore.analysis.sequential_result import SequentialSummary
from flatscore.report.sequential_text import decided_text
from flatscore.report.verdicts import (
    FIXED_NOTE,
    TONE,
    cell_verdict,
    lead_verdict,
    sequential_leads,
    signed_ci_pts,
    signed_pts,
)

MASKED = "flat score, amplified failures"


class ArmLine(BaseModel):
    """One comparison in one line: its verdict and where it was decided."""

    arm: str
    reference: str
    verdict: str
    tone: str
    fixed_note: str
    """"fixed design on the same tasks: …" where the sequential verdict leads and differs."""
    decision: str
    """Where the verdict was decided (`decision_point`)."""
    label: str


class CellLines(BaseModel):
    key: str
    verdict: str
    tone: str
    arms: list[ArmLine]
    masked: list[str]


class FirstScreen(BaseModel):
    """Every cell's lines, and the sequential saving (None without a sequential reading)."""

    cells: list[CellLines]
    saving: str | None


def decision_point(c: Comparison) -> str:
    """Where the comparison's verdict was decided: the paired tasks at the look that decided
    a sequential run, that it went to the design's maximum, or that it is still open; the
    paired tasks read by a fixed design (and the sequential replay's decision beside it)."""
    s = c.sequential
    read = f"{c.paired_tasks} paired tasks read"
    if s is None:
        return read
    if sequential_leads(c):
        at_max = s.tasks >= s.tasks_available
        if s.decided and not at_max:
            return f"decided after {s.tasks} of {s.tasks_available} paired tasks"
        if s.more_tasks:  # still open: its planned looks go on
            return decided_text(s)
        how = "decided" if s.decided else "undecided"
        return f"{how} at the design's maximum, {s.tasks} paired tasks"
    return f"{read}; sequential replay: {decided_text(s)}"


def saving_line(s: SequentialSummary, ran: int | None) -> str:
    """The episodes the sequential run ran (`ran`: the episodes its files hold; None for the
    replay of a fixed-design run) or the reading would have run, against the fixed design's.
    Where a run is read with other rules than it ran with, both."""
    saved = f"{100 * s.saving:.0f}% saved; {s.tasks:,} of {s.tasks_available:,} paired tasks"
    if ran is not None:
        line = (
            f"Run sequentially: {ran:,} episodes against the fixed design's "
            f"{s.episodes_available:,}"
        )
        if ran == s.episodes:
            return f"{line} ({saved})."
        run_saved = 1 - ran / s.episodes_available if s.episodes_available else 0.0
        return (
            f"{line} ({100 * run_saved:.0f}% saved); read with these rules it would have "
            f"stopped after {s.episodes:,} ({saved})."
        )
    return (
        f"Read sequentially, this study would have stopped after {s.episodes:,} of its "
        f"{s.episodes_available:,} episodes ({saved})."
    )


def _masked_line(c: Comparison, default_k: int) -> str | None:
    """ "S(K) level at K = 9 (gap +3.9 [-0.7, +7.7] points), apart at K = 0 (+16.2 [...])":
    each word only where its interval says so (`interval_words`); None where the small
    budget's gap is not shown above 0 (nothing is masked then)."""
    at = {g.K: g for g in c.gap}
    low, high = at.get(min(at, default=0)), at.get(default_k)
    if low is None or high is None or low.K == high.K:
        return None
    if interval_words(low.ci_low, low.ci_high) != "apart":
        return None

    def gap(g: object) -> str:
        v, lo, hi = (getattr(g, f) for f in ("gap", "ci_low", "ci_high"))
        return f"{signed_pts(v)}{signed_ci_pts(lo, hi)} points"

    if interval_words(high.ci_low, high.ci_high) == "level":
        at_default = f"S(K) level with {c.reference}'s at K = {high.K} (gap {gap(high)})"
        how = "the error budget masks its failures"
    else:
        at_default = f"S(K) below {c.reference}'s at K = {high.K} (gap {gap(high)})"
        how = "the error budget hides part of its failures"
    return f"{c.arm}: {at_default}, further apart at K = {low.K} (gap {gap(low)}): {how}"


def interval_words(low: float | None, high: float | None) -> str:
    """What a gap's interval allows a sentence to say: "level" (it holds 0), "apart" (it
    lies wholly above 0: the arm does worse), "ahead" (wholly below 0), "unknown" (none)."""
    if low is None or high is None:
        return "unknown"
    if low > 0:
        return "apart"
    if high < 0:
        return "ahead"
    return "level"


def cell_lines(analysis: AnalysisResult) -> list[CellLines]:
    """Each cell, each arm's verdict in one line, and the masked regime where it is found."""
    default_k = analysis.settings.default_K
    out = []
    for cell in analysis.cells:
        arms = []
        for c in cell.comparisons:
            verdict, fixed = lead_verdict(c)
            arms.append(
                ArmLine(
                    arm=c.arm,
                    reference=c.reference,
                    verdict=verdict or "not computed",
                    tone=TONE.get(verdict, "warn"),
                    fixed_note=FIXED_NOTE.format(fixed) if fixed else "",
                    decision=decision_point(c),
                    label="negative control" if c.control_of else "",
                )
            )
        masked = [
            line
            for c in cell.comparisons
            if str(c.verdict) == MASKED and (line := _masked_line(c, default_k)) is not None
        ]
        out.append(
            CellLines(
                key=f"{cell.model} · {cell.domain}",
                verdict=cell_verdict(cell),
                tone=TONE.get(cell_verdict(cell), "warn"),
                arms=arms,
                masked=masked,
            )
        )
    return out


def _usable(analysis: AnalysisResult) -> int:
    """The episodes a run's files hold that the analysis reads (infrastructure errors left
    out, as the sequential reading's episode counts leave them out)."""
    return analysis.episodes_read - analysis.infrastructure_errors


def first_screen(analysis: AnalysisResult) -> FirstScreen:
    """What the top of report.html shows, from the analysis alone."""
    ran = any(
        c.sequential is not None and c.sequential.ran_sequentially
        for cell in analysis.cells
        for c in cell.comparisons
    )
    s = analysis.sequential
    return FirstScreen(
        cells=cell_lines(analysis),
        saving=None if s is None else saving_line(s, _usable(analysis) if ran else None),
    )
