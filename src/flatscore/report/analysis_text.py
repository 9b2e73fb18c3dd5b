"""The analysis' text fields, filled in from its numbers and settings: the definition each
number follows and the sequential reading's design and task order. `analyze` leaves them
empty (text is the report's); analysis.json, report.html, summary.md and the terminal carry
them. An analysis read back from analysis.json has them already and keeps its own."""

from __future__ import annotations

from typing import Any

from flatscore.analysis.result import AnalysisResult
from flatscore.report.definitions import definitions
from flatscore.report.sequential_text import worded_summary


def worded(analysis: AnalysisResult) -> AnalysisResult:
    """`analysis` with its text fields filled in (itself when nothing is missing)."""
    update: dict[str, Any] = {}
    if not analysis.definitions:
        update["definitions"] = definitions(analysis.settings)
    if analysis.sequential is not None:
        sequential = worded_summary(analysis.sequential, analysis.settings)
        if sequential is not analysis.sequential:
            update["sequential"] = sequential
    return analysis.model_copy(update=update) if update else analysis
