"""Hugging Face model cards' data from an analysis: the rows each card reports and their
`model-index` metadata (`flatscore export model-card RUNS --out DIR`; the card's text and
the files are `flatscore.report.model_card`'s).

A quantized checkpoint is published on the Hub as a repository of its own, whose README's
`model-index` metadata carries its evaluation results. So the export writes one card per
(model, arm): `<model>__<arm>/README.md`, YAML front matter then a Markdown body, with one
`model-index` result per domain holding

- `success_rate` at the default budget (S(K), K = recorded max_errors − 1), with its 95%
  interval in the metric's `args`;
- `success_rate` at the tight budget (S(K = 2) by default), with its interval;
- `failed_call_ratio`: all failed agent calls, the arm's rate over the reference's, with
  its interval and the multiplicity-adjusted p (not on the reference's own card);
- `flatscore_verdict`: the analysis' verdict on the arm against the reference (`reference`
  on the reference's card), the reason in `args`.

Every number is read from the `AnalysisResult` (nothing is recomputed here); success rates
and intervals are in percent, as the Hub's tables show them. `results.md` beside the cards
holds the table for every arm. The YAML is PyYAML's; `huggingface_hub` (`ModelCard.load`,
`metadata_load`) reads it back, which the tests check, but is not needed to write it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flatscore.analysis.result import AnalysisResult, BudgetPoint, ChannelAmplification, Comparison
from flatscore.errors import InputError
from flatscore.report.analysis_text import worded

TASK_TYPE = "text-generation"
TASK_NAME = "tool-calling agent (flatscore)"
REFERENCE_VERDICT = "reference"


@dataclass(frozen=True)
class CardRow:
    """One arm in one domain: what its card reports there."""

    model: str
    domain: str
    arm: str
    reference: str
    tasks: int
    trials: int
    episodes: int
    default: BudgetPoint
    tight: BudgetPoint
    comparison: Comparison | None
    """None on the reference's own row."""

    @property
    def verdict(self) -> str:
        if self.comparison is None:
            return REFERENCE_VERDICT
        from flatscore.report.verdicts import lead_verdict  # the reading's verdict

        return lead_verdict(self.comparison)[0] or "inconclusive"

    @property
    def verdict_shown(self) -> str:
        """The verdict as the card's table shows it: the other reading's named beside it where
        it differs (`report.verdicts.verdict_text`)."""
        from flatscore.report.verdicts import verdict_text

        return REFERENCE_VERDICT if self.comparison is None else verdict_text(self.comparison)

    @property
    def failed_calls(self) -> ChannelAmplification | None:
        return self.comparison.failed_calls if self.comparison is not None else None


def _point(curve: list[BudgetPoint], k: int, where: str) -> BudgetPoint:
    point = {p.K: p for p in curve}.get(k)
    if point is None:
        raise InputError(
            f"{where}: S(K) at K = {k} was not computed (analysed budgets: "
            f"{[p.K for p in curve]}); include it in the analysis' budgets",
            field="--tight-budget",
        )
    return point


def card_rows(result: AnalysisResult, tight_k: int) -> list[CardRow]:
    """Every (model, domain, arm) of the analysis, reference first in each cell."""
    result = worded(result)  # each row's verdict reason
    default_k = result.settings.default_K
    if tight_k >= default_k:
        raise InputError(
            f"the tight budget K = {tight_k} must be below the default K = {default_k}",
            field="--tight-budget",
        )
    rows = []
    for cell in result.cells:
        comparisons = {c.arm: c for c in cell.comparisons}
        arms = sorted(cell.arms, key=lambda a: a.arm != cell.reference)  # stable: ref first
        for arm in arms:
            where = f"{cell.model} / {cell.domain} / {arm.arm}"
            comparison = comparisons.get(arm.arm)
            if comparison is None and arm.arm != cell.reference:
                continue  # an arm the analysis could not pair with the reference
            rows.append(
                CardRow(
                    model=cell.model,
                    domain=cell.domain,
                    arm=arm.arm,
                    reference=cell.reference,
                    tasks=arm.tasks,
                    trials=arm.trials_min,
                    episodes=arm.episodes,
                    default=_point(arm.budget_curve, default_k, where),
                    tight=_point(arm.budget_curve, tight_k, where),
                    comparison=comparison,
                )
            )
    if not rows:
        raise InputError("the analysis holds no arm to write a card for", field="RUNS")
    return rows


def _pct(x: float | None) -> float | None:
    return None if x is None else round(100 * x, 2)


def _num(x: float | None, digits: int = 4) -> float | None:
    return None if x is None else round(float(x), digits)


def _sig(x: float | None) -> float | None:
    """A p-value to 3 significant digits (2.4e-05, not 0.0)."""
    return None if x is None else float(f"{x:.3g}")


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _success_metric(point: BudgetPoint, label: str, confidence: float) -> dict[str, Any]:
    return {
        "type": "success_rate",
        "name": f"success within {label} error budget, S(K={point.K}) (%)",
        "value": _pct(point.success_rate),
        "args": _drop_none(
            {
                "K": point.K,
                "ci_low": _pct(point.ci_low),
                "ci_high": _pct(point.ci_high),
                "confidence": confidence,
            }
        ),
    }


def _result(row: CardRow, confidence: float) -> dict[str, Any]:
    """One `model-index` result: the arm in one domain."""
    metrics = [
        _success_metric(row.default, "the default", confidence),
        _success_metric(row.tight, "a tight", confidence),
    ]
    ratio = row.failed_calls
    if ratio is not None:
        metrics.append(
            {
                "type": "failed_call_ratio",
                "name": f"failed agent tool calls, rate vs {row.reference} (×)",
                "value": _num(ratio.ratio),
                "args": _drop_none(
                    {
                        "reference": row.reference,
                        "ci_low": _num(ratio.ci_low),
                        "ci_high": _num(ratio.ci_high),
                        "p_adjusted": _sig(ratio.p_adjusted),
                        "amplified": ratio.amplified,
                    }
                ),
            }
        )
    reason = row.comparison.verdict_reason if row.comparison is not None else ""
    metrics.append(
        {
            "type": "flatscore_verdict",
            "name": f"flatscore verdict vs {row.reference}",
            "value": row.verdict,
            "args": _drop_none({"reference": row.reference, "reason": reason or None}),
        }
    )
    return {
        "task": {"type": TASK_TYPE, "name": TASK_NAME},
        "dataset": {
            "type": f"flatscore/{row.domain}",
            "name": f"{row.domain} ({row.tasks} tasks × {row.trials} trials)",
        },
        "metrics": [_drop_none(m) for m in metrics],
    }


def model_index(rows: list[CardRow], name: str, confidence: float) -> list[dict[str, Any]]:
    """The `model-index` of one arm's card: one result per domain."""
    return [{"name": name, "results": [_result(r, confidence) for r in rows]}]
