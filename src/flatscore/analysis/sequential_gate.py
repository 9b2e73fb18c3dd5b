"""`flatscore gate --sequential`: the gate's verdict from the sequential verdicts
(docs/gate.md, docs/analysis.md "Sequential verdicts").

The two runs (or the study they are runs of: `gate.prepare`) are analysed with `sequential`
on (`sequential_replay`; `formats.pipeline.gate_labelled`), every comparison of the family
together; each cell's comparison is read in its task order and decided at the planned looks:
"visible damage" and "flat score, amplified failures" are **damage**, "no damage detected"
(a drop beyond the margin ruled out, no amplification decided) is **pass**, anything else
**inconclusive** — open, with the tasks the planned looks still allow when the runs stop
short of the design's maximum (`max_tasks`). Exit codes as the fixed gate's. Unlike the
fixed gate it decides at the default budget only (the tight budget is not part of the
sequential decision).
"""

from __future__ import annotations

from flatscore.analysis.comparison import default_test
from flatscore.analysis.gate import (
    GateCell,
    GateOptions,
    GateResult,
    Prepared,
    candidate_cells,
    candidate_comparison,
)
from flatscore.analysis.result import AnalysisResult
from flatscore.analysis.verdict_rule import GATE_OF
from flatscore.errors import InputError


def sequential_gate(result: AnalysisResult, prepared: Prepared, o: GateOptions) -> GateResult:
    """The gate's verdict from the sequential reading of `prepared`'s episodes (analysed
    with `sequential` on by `formats.pipeline.gate_labelled`)."""
    _, ref_arm, cand_arm, scope = prepared
    cells: list[GateCell] = []
    for cell in candidate_cells(result, cand_arm, scope):
        comp = candidate_comparison(cell, cand_arm, ref_arm)
        seq = comp.sequential
        if seq is None:  # analysed with sequential on: every paired comparison has one
            raise InputError(
                f"{cell.model} / {cell.domain}: no sequential reading of {cand_arm!r}",
                field="candidate",
            )
        cells.append(
            GateCell.for_comparison(
                cell,
                comp,
                ref_arm,
                budgets=[(comp.budget_tests or [default_test(comp)])[0]],
                amplified_channels=[],
                channels_tested=True,
                verdict=GATE_OF[seq.verdict],
                analysis_verdict=seq.verdict,
                reason="",  # in words: `report.gate_text`
                sequential=seq,
                comparison=comp,
            )
        )
    return GateResult.of(cells, o, result, scope, sequential=True)
