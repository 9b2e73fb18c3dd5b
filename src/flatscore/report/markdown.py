"""summary.md: the verdicts and key numbers as Markdown, for a pull request or a chat.

Model-generated names can reach this file (novel tool names), so every such string is
escaped for Markdown and HTML: a renderer shows it as text, never as a link or markup.
"""

from __future__ import annotations

from collections.abc import Callable

from flatscore.analysis.result import AnalysisResult, Cell, FloorStat
from flatscore.report.analysis_text import worded
from flatscore.report.cost_text import cost_lines
from flatscore.report.first_screen import cell_lines
from flatscore.report.markdown_escape import md_escape
from flatscore.report.markdown_table import table_lines
from flatscore.report.sequential_text import conditional_text, sequential_line, study_text
from flatscore.report.verdicts import (
    REACH,
    cell_reason,
    cell_verdict,
    floor_se,
    headlines,
    pct,
    pts,
    pval,
    ratio,
)

CODE_PHRASES = ("`flatscore power`",)
"""Commands our own sentences quote: shown as code, not as escaped backticks."""


def md_sentence(text: str) -> str:
    """A generated sentence: escaped like any text, except the commands it quotes."""
    text = md_escape(text)
    for phrase in CODE_PHRASES:
        text = text.replace(md_escape(phrase), phrase)
    return text


def _beside(s: FloorStat) -> str:
    """A signed diagnostic's table cell: the arm, its floor at the full trial count with the
    floor's standard error, and * where the arm lies beyond that floor (`beyond_full_trials`)."""
    if s.kind == "ratio":
        arm, size = ratio(s.arm), ratio(s.floor_full_trials)
    else:
        arm, size = pts(s.arm), f"±{pts(s.floor_full_trials)}"
    se = floor_se(s)
    floor = size if se is None else f"{size}, {se}"
    return f"{arm} ({floor})" + (" *" if s.beyond_full_trials() else "")


def _floor_table(cell: Cell) -> list[str]:
    """Each arm's diagnostics beside the reference's noise floor (docs/analysis.md)."""
    rows = [c for c in cell.comparisons if c.noise_floor is not None and c.noise_floor.splits]
    if not rows:
        return []
    k = min(p.K for p in rows[0].gap)
    out = [
        "",
        f"Noise floor: {md_escape(cell.reference)} against itself (its trials split in halves). "
        "ρ and novel share: the arm (full), the arm at the floor's size, the floor; the others: "
        "the arm, and ± the typical reference-vs-reference difference at the full trial count "
        "with its task-bootstrap standard error (ratios: as a factor); * where the arm exceeds "
        f"that floor by more than {REACH}.",
        "",
    ]
    head = [
        "arm vs ref",
        "ρ: arm · half · floor",
        "novel: arm · half · floor",
        "names",
        "failed calls × (floor)",
        f"Gap(K={k}) (floor ±)",
        "recovery Δ (floor ±)",
        "repeats Δ (floor ±)",
        "re-issues Δ (floor ±)",
    ]
    table: list[list[str]] = []
    for c in rows:
        assert c.noise_floor is not None
        d = c.noise_floor.diagnostics

        def level(s: FloorStat, show: Callable[[float | None], str]) -> str:
            return f"{show(s.arm)} · {show(s.arm_half)} · {show(s.floor)}"

        def rho(x: float | None) -> str:
            return "—" if x is None else f"{x:.2f}"

        fc, gap, rec = d["failed_calls"], d[f"gap.K{k}"], d["recovery_difference"]
        table.append(
            [
                f"{md_escape(c.arm)} vs {md_escape(c.reference)}",
                level(d["spearman_rho"], rho),
                level(d["novel_fraction"], pct),
                c.noise_floor.invariance,
                _beside(fc),
                _beside(gap),
                _beside(rec),
                *(
                    _beside(x) if x else "—"
                    for x in (d.get("repeat_difference"), d.get("reissue_difference"))
                ),
            ]
        )
    return out + table_lines(head, table, "lrrLrrrr")


def verdict_lines(analysis: AnalysisResult) -> list[str]:
    """The summary's first screen, as report.html's (`first_screen`): every comparison's
    verdict in one line with where it was decided."""
    lines = ["## Verdicts", ""]
    for cell in cell_lines(analysis):
        for a in cell.arms:
            label = f" ({md_escape(a.label)})" if a.label else ""
            note = f" ({md_escape(a.fixed_note)})" if a.fixed_note else ""
            lines.append(
                f"- {md_escape(cell.key)} · {md_escape(a.arm)} vs {md_escape(a.reference)}"
                f"{label}: **{a.verdict}**{note} — {md_escape(a.decision)}"
            )
    return [*lines, ""]


def render_summary(analysis: AnalysisResult, *, generated_at: str | None = None) -> str:
    """The Markdown summary: one section per cell, a headline per arm, a small table."""
    analysis = worded(analysis)
    s = analysis.settings
    lines = [
        "# flatscore summary",
        "",
        f"{analysis.episodes_read} episodes read ({analysis.infrastructure_errors} infrastructure "
        f"errors excluded) · default error budget K = {s.default_K} · task-weighted · success "
        f"CIs: paired interval; other CIs: {s.bootstrap} task-bootstrap resamples "
        f"(≥ {s.bootstrap_min_tasks} paired tasks), seed {s.seed} · flatscore "
        f"{analysis.flatscore_version}"
        + (f" · generated {md_escape(generated_at)}" if generated_at else ""),
        "",
    ]
    if analysis.sequential is not None:
        lines += [md_escape(study_text(analysis.sequential, s)) + ".", ""]
    lines += verdict_lines(analysis)
    for cell in analysis.cells:
        lines += [
            f"## {md_escape(cell.model)} · {md_escape(cell.domain)}: **{cell_verdict(cell)}**",
            "",
            md_escape(cell_reason(cell)),
            "",
        ]
        for h in headlines(cell, s):
            label = f" ({md_escape(h.label)})" if h.label else ""
            if h.fixed_note:
                label += f" ({h.fixed_note})"
            lines.append(
                f"- **{md_escape(h.arm)} vs {md_escape(h.reference)}: {h.verdict}.**{label}"
            )
            lines += [f"  {md_sentence(sentence)}" for sentence in h.sentences]
            seq = next((c.sequential for c in cell.comparisons if c.arm == h.arm), None)
            if seq is not None:
                lines.append(f"  Sequential: {md_escape(sequential_line(seq))}.")
                label = conditional_text(seq)
                if label:
                    lines.append(f"  {md_escape(label)}")
        lines += [
            "",
            f"Risk screen ({md_escape(cell.reference)} alone): **{cell.risk_screen.verdict}** — "
            f"{md_escape(cell.risk_screen.reason)}",
            "",
        ]
        small_k = min((p.K for a in cell.arms for p in a.budget_curve), default=None)
        arms: list[list[object]] = []
        for a in cell.arms:
            s_small = next((p.success_rate for p in a.budget_curve if small_k == p.K), None)
            unknown = a.channels.get("unknown_tool")
            arms.append(
                [
                    md_escape(a.arm),
                    a.episodes,
                    pct(a.success_rate),
                    f"{pct(s_small)} (K={small_k})",
                    f"{a.failed_agent_calls} / {a.agent_tool_calls}",
                    pct(unknown.rate if unknown else None),
                    pct(a.recovery_rate),
                    pct(a.repeat_share),
                    pct(a.reissue_share),
                ]
            )
        head = [
            "arm",
            "episodes",
            "success",
            "S(K=small)",
            "failed calls / agent calls",
            "unknown-tool rate",
            "recovery",
            "failed calls repeating the one just failed",
            "calls re-issuing a succeeded one",
        ]
        lines += table_lines(head, arms, "lr")
        if cell.comparisons:
            comparisons: list[list[str]] = []
            for c in cell.comparisons:
                g = c.gap_default
                amp = c.channel_amplification.get("unknown_tool")
                rho = "—" if c.spearman_rho is None else f"{c.spearman_rho:.2f}"
                gap_amp = (
                    "—" if c.gap_amplification.value is None else f"{c.gap_amplification.value:.1f}"
                )
                unknown_x = ratio(amp.ratio if amp else None)
                if amp is not None and amp.ratio is None and amp.count_ref == 0 and amp.count_arm:
                    unknown_x = f"new: 0 → {pct(amp.rate_arm)}"
                interval = (
                    f" [{pts(g.ci_low)}, {pts(g.ci_high)}]"
                    if g.ci_low is not None and g.ci_high is not None
                    else ""
                )
                comparisons.append(
                    [
                        f"{md_escape(c.arm)} vs {md_escape(c.reference)}",
                        f"{pts(g.gap)}{interval}",
                        gap_amp,
                        unknown_x,
                        rho,
                        pct(c.novel_fraction),
                        pval(c.p_value),
                        pval(c.p_holm),
                        "yes" if c.tost_equivalent else "no",
                    ]
                )
            head = [
                "arm vs ref",
                "Gap(K default) [unadjusted 95% CI]",
                "gap amplification",
                "unknown-tool ×",
                "ρ",
                "novel",
                "raw p",
                "Holm p",
                "TOST equivalent",
            ]
            lines += ["", *table_lines(head, comparisons, "lrrrrrrrc")]
            lines += _floor_table(cell)
        lines.append("")
    if analysis.cost is not None:
        lines += ["## Cost per arm", "", *cost_lines(analysis)]
        lines += [f"- warning: {md_escape(w)}" for w in analysis.cost.warnings] + [""]
    lines += [
        "Gaps are in percentage points (reference − arm), task-weighted, with paired "
        "intervals (a score statistic on per-task differences; Tango's with few discordant "
        "tasks). Full report: `report.html`; "
        "every number: `analysis.json`.",
        "",
    ]
    return "\n".join(lines)
