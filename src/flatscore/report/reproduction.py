"""The top of a reproduced study's report: how many episodes this machine played exactly as
the archive holds them, above the first screen every report has (`first_screen`: each arm's
verdict in one line, where it was decided, and the sequential saving).

`flatscore demo` fills a `Banner` (its count and first difference worded here from the
comparison, `store.compare`); `write_report(..., banner=...)` puts it on top of report.html
and summary.md. Nothing here computes a statistic: it reads the analysis.
"""

from __future__ import annotations

from pydantic import BaseModel

from flatscore.analysis.result import AnalysisResult
from flatscore.report.first_screen import first_screen
from flatscore.store.compare import Divergence, Reproduction


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


def reproduced_count(reproduction: Reproduction) -> str:
    """ "N of N episodes reproduced exactly on this machine": the banner's headline."""
    r = reproduction
    return f"{r.identical} of {r.checked} episodes reproduced exactly on this machine"


def reproduction_headline(reproduction: Reproduction) -> str:
    """The count with where it first differs, or which live episodes the archive lacks, in
    one line (a round's line in `benchmarks/demo_throughput.py`)."""
    r = reproduction
    text = reproduced_count(r)
    if r.first_divergence is not None:
        text += f"; the first difference: {divergence_text(r.first_divergence)}"
    elif r.not_archived:
        text += f"; {len(r.not_archived)} not in the archive ({r.not_archived[0]}, ...)"
    return text


def divergence_text(d: Divergence) -> str:
    """Where a live episode first differs, in one line: the episode, the turn, the position
    and both texts."""
    where = f"{d.arm} · {d.domain} · {d.task_id} · trial {d.trial + 1}"
    at = f"turn {d.turn}" if d.turn is not None else "episode"
    pos = f", character {d.position}" if d.position is not None else ""
    return (
        f"{where} ({d.episode_id}), {at}, {d.field}{pos}: archived {d.archived!r}, live {d.live!r}"
    )


def banner_markdown(banner: Banner, analysis: AnalysisResult) -> str:
    """The banner and the first screen's lines as the top of summary.md."""
    lines = [f"**{banner.headline}**", "", banner.about, ""]
    if banner.exact is False:
        lines += [f"- {d}" for d in banner.details] + [""]
    screen = first_screen(analysis)
    if screen.saving:
        lines += [screen.saving, ""]
    for cell in screen.cells:
        lines.append(f"**{cell.key}**: {cell.verdict}")
        lines.append("")
        for a in cell.arms:
            label = f" ({a.label})" if a.label else ""
            fixed = f" ({a.fixed_note})" if a.fixed_note else ""
            lines.append(f"- {a.arm} vs {a.reference}{label}: {a.verdict}{fixed} · {a.decision}")
        lines += [f"- {m}" for m in cell.masked]
        lines.append("")
    return "\n".join(lines) + "\n"
