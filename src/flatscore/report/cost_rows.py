"""The trade-off on one page: each arm's quality next to its cost (analysis.json `cost`).

`quality_cost_rows` joins, per (model, domain, arm), S(K) at the default and the tight budget
and the number of amplified channels with the arm's cost row; the cost figure, the report's
table and summary.md's lines all read these rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from flatscore.analysis.result import AnalysisResult, ArmCost, Cell


@dataclass(frozen=True)
class QualityCost:
    model: str
    domain: str
    arm: str
    s_default: float | None
    s_tight: float | None
    amplified: int
    cost: ArmCost | None

    @property
    def per_success(self) -> tuple[float | None, str]:
        """Cost per successful episode: money when priced, else machine seconds."""
        c = self.cost
        if c is None:
            return None, ""
        if c.money_per_success is not None:
            return c.money_per_success, c.currency or ""
        return c.machine_s_per_success, "machine-s"


def tight_k(analysis: AnalysisResult) -> int:
    """The tight budget shown next to the default: the analysis settings' tight budget, or
    the smallest budget analysed when that one was not."""
    budgets = analysis.settings.budgets
    k = analysis.settings.tight_budget
    return k if k in budgets else min(budgets)


def _s(cell: Cell, arm: str, k: int) -> float | None:
    stats = next(a for a in cell.arms if a.arm == arm)
    return next((p.success_rate for p in stats.budget_curve if k == p.K), None)


def quality_cost_rows(analysis: AnalysisResult) -> list[QualityCost]:
    k_def, k_tight = analysis.settings.default_K, tight_k(analysis)
    costs = analysis.cost
    rows = []
    for cell in analysis.cells:
        amplified = {c.arm: len(c.amplified_channels) for c in cell.comparisons}
        for a in cell.arms:
            rows.append(
                QualityCost(
                    model=cell.model,
                    domain=cell.domain,
                    arm=a.arm,
                    s_default=_s(cell, a.arm, k_def),
                    s_tight=_s(cell, a.arm, k_tight),
                    amplified=amplified.get(a.arm, 0),
                    cost=costs.row(cell.model, cell.domain, a.arm) if costs else None,
                )
            )
    return rows
