"""The gate's result in words (`flatscore gate`, docs/gate.md): each cell's reason (the
verdict rule's, `verdict_reason`; a sequential cell's decision), what more data would decide
an inconclusive cell, the one paragraph that leads with the verdict, and the error of a cell
with no comparison to decide from. The gate decides and keeps the data (`analysis.gate`);
the command words it before it prints or writes it."""

from __future__ import annotations

from flatscore.analysis.gate import (
    SIZE_FACTORS,
    TARGET_POWER,
    Family,
    GateCell,
    GateResult,
    MoreData,
    NoComparison,
)
from flatscore.analysis.verdict_rule import GateVerdict
from flatscore.errors import InputError
from flatscore.report.sequential_text import decided_text
from flatscore.report.verdict_reason import reason
from flatscore.report.warning_text import warnings

HEADLINES: dict[GateVerdict, str] = {
    "pass": "PASS: the candidate may replace the reference.",
    "damage": "DAMAGE: the candidate may not replace the reference.",
    "inconclusive": "INCONCLUSIVE: the data cannot decide yet.",
}
"""The first words of the gate's paragraph, fixed or sequential."""


def worded_gate(result: GateResult) -> GateResult:
    """`result` with its words filled in where the gate left them empty."""
    cells = [_worded_cell(c, result) for c in result.cells]
    result = result.model_copy(update={"cells": cells})
    if result.notices:  # the analysis' own warnings, where it gave them
        at = result.notices_at
        said = [*result.warnings[:at], *warnings(result.notices), *result.warnings[at:]]
        result = result.model_copy(update={"warnings": list(dict.fromkeys(said)), "notices": []})
    if result.summary:
        return result
    text = sequential_paragraph(result) if result.sequential else paragraph(result)
    return result.model_copy(update={"summary": text})


def _worded_cell(cell: GateCell, result: GateResult) -> GateCell:
    update: dict[str, object] = {}
    c = cell.comparison
    if not cell.reason and c is not None:
        if result.sequential:
            assert c.sequential is not None  # analysed sequentially: every comparison has one
            update["reason"] = "sequential: " + decided_text(c.sequential)
        else:
            update["reason"] = reason(c, result.options, result.options.channels)
    more = cell.more_data
    if more is not None and not more.note:
        update["more_data"] = more.model_copy(update={"note": more_data_note(more, result)})
    return cell.model_copy(update=update) if update else cell


def more_data_note(more: MoreData, result: GateResult) -> str:
    """What the power analysis says would decide an inconclusive cell."""
    if more.error is not None:
        return f"power analysis not applicable: {more.error}"
    margin = f"{result.options.margin_points:.1f} points"
    if not (more.tasks or more.trials):
        return (
            f"even {SIZE_FACTORS[-1]:g}× the tasks would not detect a drop of {margin} at "
            f"K = {more.K} with {TARGET_POWER:.0%} power (power simulation: docs/analysis.md)"
        )
    sizes = (
        f"{more.tasks} tasks × {more.reference_trials} trial(s)" if more.tasks else "",
        f"{more.paired} tasks × {more.trials} trials" if more.trials else "",
    )
    return (
        f"a drop of {margin} at K = {more.K} is detected with {TARGET_POWER:.0%} power at "
        + " or ".join(x for x in sizes if x)
    )


def family_text(family: Family) -> str:
    """Which comparisons the gate corrected over, in a few words."""
    n = family.comparisons
    if family.scope == "study":
        return (
            f"corrected over the study's {n} comparisons ({len(family.arms)} arms), as "
            "`flatscore report` on these runs"
        )
    return f"corrected over its own {n} comparison{'s' if n != 1 else ''}"


def paragraph(result: GateResult) -> str:
    """One readable paragraph: the verdict, then each cell's reason."""
    o = result.options
    parts = [
        HEADLINES[result.verdict],
        f"(margin {o.margin_text()}, budgets K = "
        f"{', '.join(str(b.K) for b in result.cells[0].budgets) if result.cells else '-'}; "
        f"{family_text(result.family)})",
    ]
    for c in result.cells:
        text = (
            f"{c.domain}: {c.candidate} vs {c.reference} on {c.paired_tasks} tasks — "
            f"{c.verdict}: {c.reason}"
        )
        if c.more_data is not None:
            text += f"; {c.more_data.note}"
        parts.append(text + ".")
    return " ".join(parts)


def sequential_paragraph(result: GateResult) -> str:
    """The paragraph of `gate --sequential`: decided at the default budget only."""
    k = result.cells[0].budgets[0].K if result.cells else "-"
    return " ".join(
        [
            HEADLINES[result.verdict],
            f"(sequential, margin {result.options.margin_text()} at K = {k}; "
            f"{family_text(result.family)})",
            *(f"{c.domain}: {c.candidate} vs {c.reference} — {c.reason}." for c in result.cells),
        ]
    )


def family_note(study: int | None, gate_comparisons: int) -> str | None:
    """Why `flatscore gate` on two separate runs may decide otherwise (and a sequential
    reading stop at another task) than `flatscore report` on the study's runs: the study
    (`study`, its recorded comparisons: `analysis.recorded.recorded_comparisons`) corrected
    over all its comparisons, the gate over its own. None where both families are the same
    size or the study recorded none."""
    if study is None or study <= gate_comparisons:
        return None
    return (
        f"the study decided its {study} comparisons together (one correction over all of them); "
        f"the gate corrected over its own {gate_comparisons}, so it may stop at another task "
        "(or decide otherwise) than `flatscore report` on the study's runs; given the study's "
        "runs (its folder as both inputs) it reads the study's decision"
    )


def no_comparison(exc: NoComparison) -> InputError:
    """The gate's error for a cell with no paired comparison of the candidate, the cell's
    warnings in words."""
    cell = exc.cell
    why = [*cell.warnings, *warnings(cell.notices)]
    return InputError(
        f"{cell.model} / {cell.domain}: no paired comparison of {exc.candidate!r} with "
        f"{exc.reference!r} ({'; '.join(why) or 'no common task'})",
        field=exc.field,
    )
