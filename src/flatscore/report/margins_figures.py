"""Figures for the margin analysis and the repair effect, in the report's SVG style
(`flatscore.report.plots`: deterministic, script-free, labels escaped by matplotlib).

Kept apart from `plots.py` so the report can show them when margins.json or repair runs are
present: `flip_curve_figure(plot_id, margins)` and `repair_effect_figure(plot_id, cell)`.
"""

from __future__ import annotations

import itertools
import math

from matplotlib.figure import Figure

from flatscore.analysis.margins_result import MarginsResult
from flatscore.analysis.repair_effect import RepairCell
from flatscore.report.plots import PALETTE, _style, _to_svg


def _bin_label(lo: float, hi: float | None) -> str:
    return f"{lo:g}–{'∞' if hi is None else f'{hi:g}'}"


def flip_curve_figure(plot_id: str, margins: MarginsResult) -> str:
    """Left: flip rate (% of agent tokens whose top-1 changes) by reference-margin bin, one
    line per arm. Right: the reference's margins at tool-name (decision) tokens."""
    with _style(plot_id):
        fig = Figure(figsize=(9.0, 3.4), layout="constrained")
        left, right = fig.subplots(1, 2)
        labels: list[str] = []
        for i, arm in enumerate(margins.arms):
            labels = [_bin_label(b.lo, b.hi) for b in arm.flip_by_margin]
            ys = [
                math.nan if b.flip_rate is None else 100 * b.flip_rate for b in arm.flip_by_margin
            ]
            left.plot(
                range(len(ys)),
                ys,
                marker="o",
                ms=3,
                lw=1.6,
                color=PALETTE[(i + 1) % len(PALETTE)],
                label=arm.arm,
            )
        left.set_xticks(range(len(labels)), labels, rotation=30, fontsize=7)
        left.set(xlabel="reference margin (top-1 − top-2 logit)", ylabel="flip rate, %")
        left.set_title("Decisions flip where the margin is small", loc="left")
        if margins.arms:
            left.legend(fontsize=8, loc="best")
        dist = margins.reference_decision_margins
        edges = margins.edges
        names = [_bin_label(lo, hi) for lo, hi in itertools.pairwise(edges) if lo is not None]
        right.bar(range(len(dist.histogram)), dist.histogram, color=PALETTE[2])
        right.set_xticks(range(len(names)), names, rotation=30, fontsize=7)
        right.set(xlabel="reference margin", ylabel="tool-name tokens")
        right.set_title(f"Margins at tool-name tokens (n = {dist.count})", loc="left")
        return _to_svg(fig, plot_id)


def repair_effect_figure(plot_id: str, cell: RepairCell) -> str:
    """Repair effect at the default K per arm (points, 95% CI); 0 = no effect."""
    with _style(plot_id):
        fig = Figure(figsize=(5.0, 0.6 + 0.4 * max(1, len(cell.arms))), layout="constrained")
        ax = fig.subplots()
        for y, arm in enumerate(cell.arms):
            iv = arm.effect
            if iv.value is None:
                continue
            lo = iv.ci_low if iv.ci_low is not None else iv.value
            hi = iv.ci_high if iv.ci_high is not None else iv.value
            ax.plot([100 * lo, 100 * hi], [y, y], color="#333333", lw=1.4)
            ax.plot([100 * iv.value], [y], "o", color=PALETTE[4], ms=5)
        ax.set_yticks(range(len(cell.arms)), [a.arm for a in cell.arms])
        ax.set_ylim(len(cell.arms) - 0.5, -0.5)
        ax.axvline(0.0, color="#555555", lw=0.8)
        ax.set_xlabel("repair effect S_with − S_without, points (95% CI)")
        ax.set_title(f"{cell.model} · {cell.domain}", loc="left")
        return _to_svg(fig, plot_id)
