"""The Markdown tables of `flatscore repair-effect` and `flatscore margins` (printed by the
commands, shown in report.html): one row per cell and arm of a repair effect, one row per
reference-margin bin of a margins result."""

from __future__ import annotations

from flatscore.analysis.margins_result import MarginsResult
from flatscore.analysis.outputs import Interval
from flatscore.analysis.repair_effect import RepairEffectResult
from flatscore.report.markdown_table import table_lines


def repair_table(result: RepairEffectResult) -> str:
    """One row per cell and arm: success without / with repair at the default K, the effect
    and the interaction (points, with CIs)."""

    def pts(iv: Interval | None) -> str:
        if iv is None or iv.value is None:
            return "—"
        ci = (
            f" [{100 * iv.ci_low:+.1f}, {100 * iv.ci_high:+.1f}]"
            if iv.ci_low is not None and iv.ci_high is not None
            else ""
        )
        return f"{100 * iv.value:+.1f}{ci}"

    k = result.default_K
    head = [
        "model",
        "domain",
        "arm",
        "tasks",
        f"S({k}) without",
        f"S({k}) with",
        "repair effect",
        "interaction vs ref",
        "repair turns",
    ]
    rows: list[list[object]] = []
    for cell in result.cells:
        for a in cell.arms:
            pk = next(p for p in a.effect_by_K if k == p.K)
            ref = " (ref)" if a.arm == cell.reference else ""
            rows.append(
                [
                    cell.model,
                    cell.domain,
                    f"{a.arm}{ref}",
                    a.paired_tasks,
                    f"{100 * pk.success_without:.1f}",
                    f"{100 * pk.success_with:.1f}",
                    pts(a.effect),
                    pts(a.interaction),
                    a.repair_instructions,
                ]
            )
    return "\n".join(table_lines(head, rows, "lllr"))


def margins_table(result: MarginsResult) -> str:
    """Flip rate by reference-margin bin, one column per arm (percent, flips/tokens)."""
    head = ["reference margin", "tokens", *(a.arm for a in result.arms)]
    rows: list[list[object]] = []
    if result.arms:
        for i, b in enumerate(result.arms[0].flip_by_margin):
            hi = "∞" if b.hi is None else f"{b.hi:g}"
            cells = []
            for a in result.arms:
                x = a.flip_by_margin[i]
                cells.append(
                    "—" if x.flip_rate is None else f"{100 * x.flip_rate:.1f}% ({x.flips})"
                )
            rows.append([f"[{b.lo:g}, {hi})", b.tokens, *cells])
        rows.append(
            [
                "**all agent tokens**",
                result.agent_tokens,
                *(f"{100 * (a.flip_rate or 0):.2f}% ({a.flips})" for a in result.arms),
            ]
        )
        rows.append(
            [
                "**decision tokens**",
                result.decision_tokens,
                *(
                    "—"
                    if a.decision_flip_rate is None
                    else f"{100 * a.decision_flip_rate:.1f}% ({a.decision_flips})"
                    for a in result.arms
                ),
            ]
        )
    return "\n".join(table_lines(head, rows, "lr"))
