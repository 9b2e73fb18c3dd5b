"""The cost section's tight budget is the analysis settings' own (not a restated 2)."""

from __future__ import annotations

from report_episodes import analyzed, study

from flatscore.analysis.result import AnalysisResult
from flatscore.report.cost_rows import quality_cost_rows, tight_k
from flatscore.report.cost_text import cost_lines, cost_table


def _with_tight(analysis: AnalysisResult, k: int) -> AnalysisResult:
    settings = analysis.settings.model_copy(update={"tight_budget": k})
    return analysis.model_copy(update={"settings": settings})


def test_the_tight_budget_comes_from_the_settings() -> None:
    analysis = analyzed(study())
    budgets = analysis.settings.budgets
    assert analysis.cost is not None and len(budgets) > 2
    assert tight_k(analysis) == analysis.settings.tight_budget
    k = budgets[1]  # a budget other than the default tight one
    moved = _with_tight(analysis, k)
    assert tight_k(moved) == k
    assert f"S(K={k})" in cost_table(moved) and f"S(K={k})" in cost_lines(moved)[0]
    cell, arm = moved.cells[0], moved.cells[0].arms[0]
    expected = next(p.success_rate for p in arm.budget_curve if k == p.K)
    row = next(r for r in quality_cost_rows(moved) if (r.model, r.arm) == (cell.model, arm.arm))
    assert row.s_tight == expected


def test_a_tight_budget_not_analysed_falls_back_to_the_smallest() -> None:
    analysis = analyzed(study())
    outside = max(analysis.settings.budgets) + 1
    assert tight_k(_with_tight(analysis, outside)) == min(analysis.settings.budgets)
