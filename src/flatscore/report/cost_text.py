"""The cost section as text: the report's table and summary.md's lines, one per arm."""

from __future__ import annotations

from flatscore.analysis.result import AnalysisResult, ArmCost
from flatscore.report.cost_rows import quality_cost_rows, tight_k
from flatscore.report.markdown_escape import md_escape
from flatscore.report.markdown_table import table_lines


def _get(c: ArmCost | None, name: str) -> float | None:
    value = None if c is None else getattr(c, name)
    return None if value is None else float(value)


def _n(x: float | None, digits: int = 1, scale: float = 1.0) -> str:
    return "—" if x is None else f"{x / scale:,.{digits}f}"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


MB = 1_000_000


def cost_table(analysis: AnalysisResult) -> str:
    """The report's table (Markdown, shown preformatted), one row per cell and arm."""
    k_def, k_tight = analysis.settings.default_K, tight_k(analysis)
    head = [
        "model · domain",
        "arm",
        f"S(K={k_def})",
        f"S(K={k_tight})",
        "amplified",
        "bits/param",
        "weights MB",
        "peak RSS MB",
        "prefill tok/s",
        "decode tok/s",
        "turn p50 / p95 s",
        "prompt / completion tok/ep",
        "wall s/ep",
        "machine s/success",
        "cost/success",
    ]
    rows = []
    for r in quality_cost_rows(analysis):
        c = r.cost
        money = "—"
        if c is not None and c.money_per_success is not None:
            money = f"{c.money_per_success:.4g} {md_escape(c.currency or '')}"

        def g(name: str, digits: int = 1, scale: float = 1.0, c: ArmCost | None = c) -> str:
            return _n(_get(c, name), digits, scale)

        cells = [
            f"{md_escape(r.model)} · {md_escape(r.domain)}",
            md_escape(r.arm),
            _pct(r.s_default),
            _pct(r.s_tight),
            str(r.amplified),
            g("bits_per_parameter", 2),
            g("weight_bytes", 1, MB),
            g("peak_rss_bytes", 0, MB),
            g("prefill_tokens_per_s", 0),
            g("decode_tokens_per_s", 1),
            f"{g('turn_latency_p50_s', 2)} / {g('turn_latency_p95_s', 2)}",
            f"{g('prompt_tokens_per_episode', 0)} / {g('completion_tokens_per_episode', 0)}",
            g("wall_s_per_episode", 1),
            g("machine_s_per_success", 1),
            money,
        ]
        rows.append(cells)
    return "\n".join(table_lines(head, rows, "llr"))


def cost_lines(analysis: AnalysisResult) -> list[str]:
    """summary.md: one line per arm (per cell)."""
    k_def, k_tight = analysis.settings.default_K, tight_k(analysis)
    out = []
    for r in quality_cost_rows(analysis):
        c = r.cost
        parts = [f"S(K={k_def}) {_pct(r.s_default)}, S(K={k_tight}) {_pct(r.s_tight)}"]
        parts.append(f"{r.amplified} amplified channel(s)")
        if c is not None:
            if c.bits_per_parameter is not None:
                mb = _n(_get(c, "weight_bytes"), 1, MB)
                parts.append(f"{c.bits_per_parameter:.2f} bits/param ({mb} MB)")
            if c.turn_latency_p50_s is not None:
                parts.append(f"turn p50 {c.turn_latency_p50_s:.2f} s")
            if c.machine_s_per_success is not None:
                parts.append(f"{c.machine_s_per_success:,.1f} machine-s per success")
            if c.money_per_success is not None:
                parts.append(f"{c.money_per_success:.4g} {c.currency or ''} per success".strip())
        out.append(
            f"- {md_escape(r.model)} · {md_escape(r.domain)} · **{md_escape(r.arm)}**: "
            + "; ".join(parts)
        )
    return out
