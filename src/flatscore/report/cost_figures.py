"""The trade-off on one page: each arm's quality next to its cost (analysis.json `cost`).

`quality_cost_rows` joins, per (model, domain, arm), S(K) at the default and a tight budget
and the number of amplified channels with the arm's cost row; the figure, the report's
table and summary.md's lines all read these rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from flatscore.analysis.markdown_table import table_lines
from flatscore.analysis.result import AnalysisResult, ArmCost, Cell
from flatscore.report.markdown import md_escape
from flatscore.report.plots import PALETTE, _style, _to_svg, drop_overlapping

TIGHT_K = 2
"""The tight budget shown next to the default (the study's K = 2), or the smallest analysed."""


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
    budgets = analysis.settings.budgets
    return TIGHT_K if TIGHT_K in budgets else min(budgets)


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


def cost_figure(plot_id: str, analysis: AnalysisResult) -> str:
    """One panel per cell: success at the default K (filled) and the tight K (open), joined,
    against cost per successful episode; each arm labelled with its amplified channels."""
    rows = quality_cost_rows(analysis)
    cells = list(dict.fromkeys((r.model, r.domain) for r in rows))
    k_def, k_tight = analysis.settings.default_K, tight_k(analysis)
    with _style(plot_id):
        n_arms = len({r.arm for r in rows})
        height = 3.4 + 0.2 * math.ceil((n_arms + 2) / 5)
        fig = Figure(figsize=(min(4.2 * max(1, len(cells)), 12.6), height), layout="constrained")
        axes = fig.subplots(1, max(1, len(cells)), squeeze=False)[0]
        units = ""
        labels = []
        arm_colours: dict[str, str] = {}
        for ax, (model, domain) in zip(axes, cells, strict=False):
            points = []
            for i, r in enumerate(x for x in rows if (x.model, x.domain) == (model, domain)):
                x, units = r.per_success
                if x is not None and math.isfinite(x) and x > 0:
                    points.append((i, r, x))
            xs = [x for _, _, x in points]
            for i, r, x in points:
                color = PALETTE[i % len(PALETTE)]
                arm_colours.setdefault(r.arm, color)
                ys = [100 * v if v is not None else math.nan for v in (r.s_default, r.s_tight)]
                ax.plot([x, x], ys, color=color, lw=1.2)
                ax.plot([x], ys[:1], "o", color=color, ms=6)
                ax.plot([x], ys[1:], "o", mfc="white", color=color, ms=6)
                label = r.arm + (f" ({r.amplified} amplified)" if r.amplified else "")
                # labels fan out downwards by arm (arms at one point stay readable), and sit
                # left of the costliest arm so they stay inside the panel
                right = len(xs) > 1 and x == max(xs)
                dy = (6, -4, -14)[i % 3]
                if not ys[0] >= 15:  # near the floor (or missing): above the point
                    dy = abs(dy) + 6
                labels.append(ax.annotate(
                    label, (x, ys[0]), xytext=(-6 if right else 6, dy),
                    textcoords="offset points", fontsize=7, color=color,
                    ha="right" if right else "left",
                ))  # fmt: skip
            if xs and max(xs) > 20 * min(xs):
                ax.set_xscale("log")
                ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
                ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_title(f"{model} · {domain}", loc="left")
            ax.set(ylabel="success, %", ylim=(-5, 105))
            ax.set_xlabel(f"cost per successful episode ({units or 'n/a'})")
        axes[0].plot([], [], "o", color="#555555", label=f"S(K={k_def})")
        axes[0].plot([], [], "o", mfc="white", color="#555555", label=f"S(K={k_tight})")
        for (
            arm,
            colour,
        ) in arm_colours.items():  # a point whose label would overlap keeps its colour
            axes[0].plot([], [], "s", color=colour, label=arm)
        fig.legend(fontsize=7, loc="outside lower center", ncols=min(len(arm_colours) + 2, 5))
        drop_overlapping(fig, labels)  # arms at one point: the first label, the rest by colour
        return _to_svg(fig, plot_id)


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
