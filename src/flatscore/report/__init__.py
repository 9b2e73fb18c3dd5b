"""The report: one self-contained `report.html`, `summary.md`, `analysis.json` and `tables.md`
(the study's tables, `flatscore.report.tables`) in a folder.

`write_report` is the one entry point (`flatscore report`, `flatscore run` and `flatscore
demo` all call it). The output depends only on its inputs: the same analysis and episodes
give byte-identical files.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from flatscore.analysis.channels import BUILTIN_RULES, ChannelRules, load_rules
from flatscore.analysis.outputs import rounded_json
from flatscore.analysis.result import AnalysisResult
from flatscore.episode import Episode
from flatscore.report.paths import ReportPaths

if TYPE_CHECKING:
    from flatscore.report.reproduction import Banner

__all__ = ["ReportPaths", "rules_for", "write_report"]


def rules_for(analysis: AnalysisResult) -> ChannelRules:
    """The channel rules the analysis used (its settings name them), so the transcript
    browser labels each call exactly as the numbers counted it."""
    source = analysis.settings.channel_rules
    return load_rules(None if source == BUILTIN_RULES else source)


def analysis_json(analysis: AnalysisResult) -> str:
    """analysis.json's text: pydantic's field order, two-space indent, floats to
    `defaults.JSON_DIGITS` significant digits, one final newline; its words filled in
    (`analysis_text.worded`)."""
    from flatscore.report.analysis_text import worded

    return rounded_json(worded(analysis)) + "\n"


def write_report(
    analysis: AnalysisResult,
    episodes: Iterable[Episode],
    out_dir: str | Path,
    *,
    rules: ChannelRules | None = None,
    title: str = "flatscore report",
    generated_at: str | None = None,
    banner: Banner | None = None,
) -> ReportPaths:
    """Write report.html, summary.md, analysis.json and tables.md into `out_dir` (created if
    needed); `banner` (a reproduction's count and verdict lines) tops report.html and
    summary.md."""
    from flatscore.report.html import render_html
    from flatscore.report.markdown import render_summary
    from flatscore.report.tables import render as render_tables

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = ReportPaths(
        html=out / "report.html",
        summary=out / "summary.md",
        analysis=out / "analysis.json",
        tables=out / "tables.md",
    )
    html = render_html(
        analysis,
        episodes,
        rules or rules_for(analysis),
        title=title,
        generated_at=generated_at,
        banner=banner,
    )
    summary = render_summary(analysis, generated_at=generated_at)
    if banner is not None:
        from flatscore.report.reproduction import banner_markdown

        summary = banner_markdown(banner, analysis) + "\n" + summary
    # errors="replace": a lone surrogate in model text must not stop the report.
    for path, text in (
        (paths.html, html),
        (paths.summary, summary),
        (paths.analysis, analysis_json(analysis)),
        (paths.tables, render_tables(analysis)),
    ):
        path.write_text(text, encoding="utf-8", errors="replace", newline="\n")
    return paths
