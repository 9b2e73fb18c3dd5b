"""summary.md: the verdicts and key numbers as Markdown, for a pull request or a chat.

Model-generated names can reach this file (novel tool names), so every such string is
escaped for Markdown and HTML: a renderer shows it as text, never as a link or markup.
"""

from __future__ import annotations

import re

from flatscore.analysis.result import AnalysisResult
from flatscore.report.verdicts import headlines, pct, pts, pval, ratio

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")


def md_escape(text: str) -> str:
    """Text that Markdown renders literally inside a line: emphasis, code, link and table
    characters backslashed, `<`/`&` as entities (so no HTML and no autolinks)."""
    text = text.replace("&", "&amp;").replace("<", "&lt;")
    return _MD_SPECIAL.sub(r"\\\1", " ".join(text.split()))


def render_summary(analysis: AnalysisResult, *, generated_at: str | None = None) -> str:
    """The Markdown summary: one section per cell, a headline per arm, a small table."""
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
    for cell in analysis.cells:
        lines += [
            f"## {md_escape(cell.model)} · {md_escape(cell.domain)}: **{cell.verdict}**",
            "",
            md_escape(cell.verdict_reason),
            "",
        ]
        for h in headlines(cell, s.default_K):
            lines.append(f"- **{md_escape(h.arm)} vs {md_escape(h.reference)}: {h.verdict}.**")
            lines += [f"  {md_escape(sentence)}" for sentence in h.sentences]
        lines += [
            "",
            f"Risk screen ({md_escape(cell.reference)} alone): **{cell.risk_screen.verdict}** — "
            f"{md_escape(cell.risk_screen.reason)}",
            "",
            "| arm | episodes | success | S(K=small) | failed calls / agent calls "
            "| unknown-tool rate | recovery |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        small_k = min((p.K for a in cell.arms for p in a.budget_curve), default=None)
        for a in cell.arms:
            s_small = next((p.success_rate for p in a.budget_curve if small_k == p.K), None)
            unknown = a.channels.get("unknown_tool")
            lines.append(
                f"| {md_escape(a.arm)} | {a.episodes} | {pct(a.success_rate)} "
                f"| {pct(s_small)} (K={small_k}) | {a.failed_agent_calls} / {a.agent_tool_calls} "
                f"| {pct(unknown.rate if unknown else None)} | {pct(a.recovery_rate)} |"
            )
        if cell.comparisons:
            lines += [
                "",
                "| arm vs ref | Gap(K default) [95% CI] | gap amplification | unknown-tool ×"
                " | ρ | novel | raw p | Holm p | TOST equivalent |",
                "|---|---:|---:|---:|---:|---:|---:|---:|:---:|",
            ]
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
                lines.append(
                    f"| {md_escape(c.arm)} vs {md_escape(c.reference)} | {pts(g.gap)}{interval} "
                    f"| {gap_amp} | {unknown_x} | {rho} | {pct(c.novel_fraction)} "
                    f"| {pval(c.p_value)} | {pval(c.p_holm)} "
                    f"| {'yes' if c.tost_equivalent else 'no'} |"
                )
        lines.append("")
    if analysis.cost is not None:
        from flatscore.report.cost_figures import cost_lines

        lines += ["## Cost per arm", "", *cost_lines(analysis)]
        lines += [f"- warning: {md_escape(w)}" for w in analysis.cost.warnings] + [""]
    lines += [
        "Gaps are in percentage points (reference − arm), task-weighted, with paired score "
        "intervals. Full report: `report.html`; "
        "every number: `analysis.json`.",
        "",
    ]
    return "\n".join(lines)
