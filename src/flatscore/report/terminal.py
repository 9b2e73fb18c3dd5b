"""The terminal summary of an AnalysisResult: one verdict line per cell first, then tables
with the definition each number follows written beside it.

Names (models, domains, arms) come from the input files, so everything here is `Text`:
printed literally on any console, never parsed as rich markup."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from flatscore.analysis.channels import LEAF_CHANNELS
from flatscore.analysis.result import AnalysisResult, ArmStats, Cell, ChannelAmplification
from flatscore.console import styled
from flatscore.report.analysis_text import worded
from flatscore.report.sequential_text import decided_text, study_text
from flatscore.report.terminal_fit import fit
from flatscore.report.verdicts import (
    cell_reason,
    cell_verdict,
    headlines,
    lead_verdict,
    signed_ci_pts,
    signed_pts,
    verdict_text,
)

if TYPE_CHECKING:
    from flatscore.report.paths import ReportPaths

VERDICT_STYLE = {
    "visible damage": "bold red",
    "flat score, amplified failures": "bold yellow",
    "inconclusive": "bold yellow",
    "no damage detected": "bold green",
    "nothing to compare": "dim",
}
SHOWN_CHANNELS = LEAF_CHANNELS


def pct(x: float | None, digits: int = 1) -> str:
    return "—" if x is None else f"{100 * x:.{digits}f}"


def ci(lo: float | None, hi: float | None, scale: float = 100.0, digits: int = 1) -> str:
    """' [lo, hi]'; an unbounded end is written out, a missing interval is left out."""
    if lo is None:
        return ""
    high = "no upper bound" if hi is None else f"{scale * hi:.{digits}f}"
    return f" [{scale * lo:.{digits}f}, {high}]"


def channel_change(a: ChannelAmplification) -> str:
    """×ratio [CI] against the reference, or words when there is no ratio to show."""
    if a.ratio is None:
        if a.count_ref == 0 and a.count_arm > 0:
            return f"new: 0 → {pct(a.rate_arm)}%"
        return ""
    if a.ratio == 0:
        return f"gone: {pct(a.rate_ref)}% → 0"
    return f"×{a.ratio:.2f}{ci(a.ci_low, a.ci_high, 1.0, 2)}{'*' if a.amplified else ''}"


def signed(x: float | None) -> str:
    return signed_pts(x)


def signed_ci(lo: float | None, hi: float | None) -> str:
    """' [-39.0, +39.0]' (points) for a difference; nothing when there is no interval."""
    return signed_ci_pts(lo, hi)


def _s_at(arm: ArmStats, k: int) -> float | None:
    return next((p.success_rate for p in arm.budget_curve if k == p.K), None)


def verdict_lines(result: AnalysisResult) -> list[Text]:
    """Each cell's verdict and reason (a worded analysis: `analysis_text.worded`), then
    each sequential reading."""
    lines = []
    for cell in result.cells:
        verdict = cell_verdict(cell)
        style = VERDICT_STYLE[verdict]
        lines.append(
            Text.assemble(
                (f"{cell.model} / {cell.domain}", "bold"),
                ": ",
                (verdict, style),
                f" — {cell_reason(cell)}  ",
                (f"(risk screen: {cell.risk_screen.verdict})", "dim"),
            )
        )
        for c in cell.comparisons:
            if c.sequential is not None:
                lines.append(
                    Text(f"  {c.arm} vs {c.reference}, sequential: " + decided_text(c.sequential))
                )
    if result.sequential is not None:
        lines.append(Text(study_text(result.sequential, result.settings), "dim"))
    return lines


def arms_table(cell: Cell, k_small: int, k_default: int) -> Table:
    table = Table(
        title=Text(
            f"{cell.model} / {cell.domain}: arms (reference {cell.reference}: "
            f"{cell.reference_reason})"
        ),
        caption="Percent, task-weighted (each task's episodes averaged, then the tasks). "
        "success = reward 1, rewardable termination; pass^k (τ²) for k = 1..; "
        f" S(K) = success with ≤ K failed calls (default K = {k_default}); recovery = "
        "failed agent calls whose next agent call succeeds / failed agent calls; "
        "infrastructure errors excluded from everything else.",
        caption_justify="left",
    )
    for col in ("arm", "episodes", "success", "pass^k", f"S({k_small})", f"S({k_default})",
                "agent calls", "failed", "recovery", "infra"):  # fmt: skip
        table.add_column(col, justify="left" if col == "arm" else "right")
    for arm in cell.arms:
        table.add_row(
            Text(arm.arm),
            str(arm.episodes),
            pct(arm.success_rate),
            " ".join(pct(p, 0) for p in arm.pass_k[:4]),
            pct(_s_at(arm, k_small)),
            pct(_s_at(arm, k_default)),
            str(arm.agent_tool_calls),
            str(arm.failed_agent_calls),
            pct(arm.recovery_rate),
            str(arm.infrastructure_errors),
        )
    return table


def channels_table(cell: Cell, alpha: float) -> Table:
    """Rows = channels; per arm the rate (count) and, vs the reference, the amplification."""
    table = Table(
        title=Text(f"{cell.model} / {cell.domain}: failure channels"),
        caption="rate % (count) = failed agent calls in the channel / agent tool calls, "
        "task-weighted; ×ratio [95% CI] = rate_arm / rate_ref on the paired tasks, * = "
        f"amplified (ratio > 1, p corrected over the study's channel comparisons < {alpha:g}; "
        "no CI or test with fewer paired tasks than the minimum); new = a channel the reference "
        "never failed in; all failed = every failed agent call.",
        caption_justify="left",
    )
    table.add_column("channel")
    for arm in cell.arms:
        table.add_column(Text(arm.arm), justify="right")
    amp = {c.arm: c.channel_amplification for c in cell.comparisons}
    for ch in ("unknown_tool", *SHOWN_CHANNELS):
        row: list[Text] = [Text(ch)]
        for arm in cell.arms:
            st = arm.channels[ch]
            text = f"{pct(st.rate)} ({st.count})"
            a = amp.get(arm.arm, {}).get(ch)
            change = channel_change(a) if a is not None else ""
            if change:
                text += f"\n{change}"
            row.append(Text(text))
        table.add_row(*row)
    total: list[Text] = [Text("all failed")]
    for arm in cell.arms:
        rate = arm.failed_agent_calls / arm.agent_tool_calls if arm.agent_tool_calls else None
        text = f"{pct(rate)} ({arm.failed_agent_calls})"
        fc = next((c.failed_calls for c in cell.comparisons if c.arm == arm.arm), None)
        change = channel_change(fc) if fc is not None else ""
        total.append(Text(text + (f"\n{change}" if change else "")))
    table.add_row(*total)
    return table


def comparisons_table(cell: Cell, k_small: int, k_default: int) -> Table:
    table = Table(
        title=Text(f"{cell.model} / {cell.domain}: each arm vs {cell.reference}"),
        caption="Gap(K) = S_ref(K) − S_arm(K), points, paired on tasks and task-weighted, "
        "[95% paired interval]; ρ = Spearman of per-name hallucination counts over the "
        "union of names; novel = % of the arm's hallucinated calls with names the reference "
        "never produced; p = paired test of success at default K, p_adj corrected "
        "across the study; TOST = equivalent within the margin.",
        caption_justify="left",
    )
    for col in ("arm", f"Gap({k_small})", f"Gap({k_default})", "ρ", "novel", "p", "p_adj",
                "TOST", "verdict"):  # fmt: skip
        table.add_column(col, justify="left" if col in ("arm", "verdict") else "right")
    for c in cell.comparisons:
        gs = next(g for g in c.gap if k_small == g.K)
        gd = c.gap_default
        rho = "—" if c.spearman_rho is None else f"{c.spearman_rho:.2f}"
        rho += ci(c.spearman_ci_low, c.spearman_ci_high, 1.0, 2)
        table.add_row(
            Text(c.arm),
            signed(gs.gap) + signed_ci(gs.ci_low, gs.ci_high),
            signed(gd.gap) + signed_ci(gd.ci_low, gd.ci_high),
            rho,
            pct(c.novel_fraction, 2),
            "—" if c.p_value is None else f"{c.p_value:.3g}",
            "—" if c.p_adjusted is None else f"{c.p_adjusted:.3g}",
            "yes" if c.tost_equivalent else "no",
            Text(verdict_text(c), style=VERDICT_STYLE[lead_verdict(c)[0] or "nothing to compare"]),
        )
    return table


def render(result: AnalysisResult, console: Console) -> None:
    """Print the verdicts, then per cell the arms table and the comparisons table."""
    result = worded(result)
    s = result.settings
    for line in verdict_lines(result):
        console.print(line, highlight=False)
    console.print(
        Text(
            f"{result.episodes_read} episodes read, {result.infrastructure_errors} "
            f"infrastructure errors excluded; counted errors: {s.count}; default K = "
            f"{s.default_K} ({s.default_K_source}); {s.bootstrap} bootstrap resamples, seed "
            f"{s.seed}; {s.correction} correction; TOST margin {s.margin_text('g')}; "
            "task-weighted; success CIs: paired interval, other CIs: task bootstrap with "
            f"≥ {s.bootstrap_min_tasks} paired tasks",
            style="dim",
        ),
        highlight=False,
    )
    k_small = min(s.budgets)
    for cell in result.cells:
        console.print()
        console.print(fit(arms_table(cell, k_small, s.default_K), console))
        console.print(fit(channels_table(cell, s.alpha), console))
        if cell.comparisons:
            console.print(fit(comparisons_table(cell, k_small, s.default_K), console))
        console.print(Text(f"risk screen: {cell.risk_screen.reason}", style="dim"))
        for w in cell.warnings:
            console.print(Text.assemble(("warning:", "yellow"), f" {w}"), highlight=False)
    for w in result.warnings:
        console.print(Text.assemble(("warning:", "yellow"), f" {w}"), highlight=False)


def print_verdicts(
    analysis: AnalysisResult, paths: ReportPaths, console: Console, *, sentences: bool = True
) -> None:
    """Each cell's verdict, the headline per arm (with its first sentence), and where the
    report is: what `flatscore run study.yaml` and `flatscore report` end with. Every line
    is `Text`, so names and paths print literally on any console."""
    for cell in analysis.cells:
        console.print(
            styled((f"{cell.model} · {cell.domain}", "bold"), f": {cell_verdict(cell)}"),
            highlight=False,
        )
        for h in headlines(cell, analysis.settings):
            label = f" ({h.label})" if h.label else ""
            if h.fixed_note:
                label += f" ({h.fixed_note})"
            console.print(
                styled(f"  {h.arm} vs {h.reference}: {h.verdict}{label}"), highlight=False
            )
            if sentences and h.sentences:
                console.print(styled((f"    {h.sentences[0]}", "dim")), highlight=False)
    console.print(styled(f"report: {paths.html}"), highlight=False, soft_wrap=True)
    console.print(
        styled((f"also {paths.summary} and {paths.analysis}", "dim")),
        highlight=False,
        soft_wrap=True,
    )
