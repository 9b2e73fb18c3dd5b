"""The first screen of a reproduced study's report: how many episodes this machine played
exactly as the archive holds them, then each cell's arms in one line each (the verdict, and
when the sequential replay ran, after how many tasks it was decided), and where a flat score
hides amplified failures, its S(K) at the default budget and at K = 0.

`flatscore demo` fills a `Banner`; `write_report(..., banner=...)` puts it on top of
report.html and summary.md. Nothing here computes a statistic: it reads the analysis.
"""

from __future__ import annotations

from pydantic import BaseModel

from flatscore.analysis.result import AnalysisResult, Comparison
from flatscore.analysis.sequential_result import decided_text
from flatscore.report.verdicts import (
    TONE,
    cell_verdict,
    lead_verdict,
    signed_ci_pts,
    signed_pts,
)

MASKED = "flat score, amplified failures"


class Banner(BaseModel):
    """What the reproduction found, in words (filled by the caller that compared)."""

    headline: str
    """"N of N episodes reproduced exactly on this machine" (or why none were compared)."""
    exact: bool | None
    """True: every live episode identical; False: some differ; None: not compared."""
    about: str
    """What ran live and against what."""
    details: list[str] = []
    """The first divergence, both texts: shown when `exact` is False."""


class ArmLine(BaseModel):
    arm: str
    reference: str
    verdict: str
    tone: str
    sequential: str | None
    label: str


class CellLines(BaseModel):
    key: str
    verdict: str
    tone: str
    arms: list[ArmLine]
    masked: list[str]


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
            verdict, _ = lead_verdict(c)
            arms.append(
                ArmLine(
                    arm=c.arm,
                    reference=c.reference,
                    verdict=verdict or "not computed",
                    tone=TONE.get(verdict, "warn"),
                    sequential=decided_text(c.sequential) if c.sequential is not None else None,
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


def banner_markdown(banner: Banner, analysis: AnalysisResult) -> str:
    """The banner as the top of summary.md."""
    lines = [f"**{banner.headline}**", "", banner.about, ""]
    if banner.exact is False:
        lines += [f"- {d}" for d in banner.details] + [""]
    for cell in cell_lines(analysis):
        lines.append(f"**{cell.key}**: {cell.verdict}")
        lines.append("")
        for a in cell.arms:
            seq = f" · sequential: {a.sequential}" if a.sequential else ""
            label = f" ({a.label})" if a.label else ""
            lines.append(f"- {a.arm} vs {a.reference}{label}: {a.verdict}{seq}")
        lines += [f"- {m}" for m in cell.masked]
        lines.append("")
    return "\n".join(lines) + "\n"
