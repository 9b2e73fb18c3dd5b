"""The analysis' text fields, filled in from its numbers and settings: the definition each
number follows, where the default K came from (`budget_text`), why each cell's reference is
the reference (`reference_text`), each comparison's notes (`notes_text`) and noise floor
(`floor_text`), each comparison's and each cell's verdict reason, each cell's risk screen
(`risk_text`), the cost figures' units and warnings (`cost_notes`), the analysis', each
cell's and the repair effect's warnings (`warning_text`), and the sequential reading's
design and task order. `analyze` leaves them empty (text is the report's); analysis.json,
report.html, summary.md and the terminal carry them. An analysis read back from
analysis.json has them already and keeps its own."""

from __future__ import annotations

from typing import Any

from flatscore.analysis.comparison import worst
from flatscore.analysis.result import AnalysisResult, Cell, Comparison, Settings
from flatscore.report.budget_text import worded_settings
from flatscore.report.cost_notes import worded_cost
from flatscore.report.definitions import definitions
from flatscore.report.floor_text import worded_floor
from flatscore.report.notes_text import worded_notes
from flatscore.report.reference_text import WORDS as REFERENCE_WORDS
from flatscore.report.risk_text import risk_reason
from flatscore.report.sequential_text import worded_summary
from flatscore.report.verdict_reason import reason
from flatscore.report.warning_text import warnings, worded_repair


def worded(analysis: AnalysisResult) -> AnalysisResult:
    """`analysis` with its text fields filled in (itself when nothing is missing)."""
    update: dict[str, Any] = {}
    settings = worded_settings(analysis.settings)
    if settings is not analysis.settings:
        update["settings"] = settings
    cells = [_worded_cell(cell, analysis.settings) for cell in analysis.cells]
    if any(new is not old for new, old in zip(cells, analysis.cells, strict=True)):
        update["cells"] = cells
    if not analysis.definitions:
        update["definitions"] = definitions(analysis.settings)
    if analysis.notices:  # after any warning put first (what reading left out)
        update["warnings"] = [*analysis.warnings, *warnings(analysis.notices)]
        update["notices"] = []
    if analysis.cost is not None and (cost := worded_cost(analysis.cost)) is not analysis.cost:
        update["cost"] = cost
    if analysis.repair is not None:
        repair = worded_repair(analysis.repair)
        if repair is not analysis.repair:
            update["repair"] = repair
    if analysis.sequential is not None:
        sequential = worded_summary(analysis.sequential, analysis.settings)
        if sequential is not analysis.sequential:
            update["sequential"] = sequential
    return analysis.model_copy(update=update) if update else analysis


def _worded_comparison(c: Comparison, settings: Settings) -> Comparison:
    """The comparison with its notes and its noise floor in words."""
    c = worded_notes(c, settings)
    if c.noise_floor is not None and not c.noise_floor.method:
        c = c.model_copy(update={"noise_floor": worded_floor(c.noise_floor)})
    return c


def _worded_cell(cell: Cell, settings: Settings) -> Cell:
    """The cell with its warnings, each comparison's notes and reason, its own reason (the
    worst comparison's) and its risk screen's."""
    if cell.notices:  # after any warning already there
        said = [*cell.warnings, *warnings(cell.notices)]
        cell = cell.model_copy(update={"warnings": said, "notices": []})
    noted = [_worded_comparison(c, settings) for c in cell.comparisons]
    if any(new is not old for new, old in zip(noted, cell.comparisons, strict=True)):
        cell = cell.model_copy(update={"comparisons": noted})
    if not cell.reference_reason and cell.reference_why is not None:
        cell = cell.model_copy(update={"reference_reason": REFERENCE_WORDS[cell.reference_why]})
    if not cell.risk_screen.reason:
        screen = cell.risk_screen.model_copy(update={"reason": risk_reason(cell)})
        cell = cell.model_copy(update={"risk_screen": screen})
    if cell.verdict_reason and all(c.verdict_reason for c in cell.comparisons):
        return cell
    comparisons = [
        c if c.verdict_reason else c.model_copy(update={"verdict_reason": reason(c, settings)})
        for c in cell.comparisons
    ]
    why = cell.verdict_reason
    if not why and comparisons:
        w = worst(comparisons)
        why = f"{w.arm} vs {w.reference}: {w.verdict_reason}"
    elif not why:
        why = "only one arm: no comparison was made"
    return cell.model_copy(update={"comparisons": comparisons, "verdict_reason": why})
