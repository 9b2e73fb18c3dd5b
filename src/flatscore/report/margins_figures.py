"""Figures for the margin analysis and the repair effect, in the report's SVG style
(`flatscore.report.plots`: deterministic, script-free, every label escaped).

Kept apart from `plots.py` so the report can show them when margins.json or repair runs are
present: `flip_curve_figure(plot_id, margins)` and `repair_effect_figure(plot_id, cell)`.
"""

from __future__ import annotations

import itertools

from flatscore.analysis.margins_result import MarginsResult
from flatscore.analysis.repair_effect import RepairCell
from flatscore.report.axes import (
    PALETTE,
    TICK,
    LegendEntry,
    Panel,
    Style,
    fitting_ticks,
    legend,
    padded,
    tick_width,
    y_ticks,
)
from flatscore.report.plots import INCH, LINE, TITLE, XLABEL, YLABEL
from flatscore.report.svg import Drawing, text_width


def _bin_label(lo: float, hi: float | None) -> str:
    return f"{lo:g}–{'∞' if hi is None else f'{hi:g}'}"


def flip_curve_figure(plot_id: str, margins: MarginsResult) -> str:
    """Left: flip rate (% of agent tokens whose top-1 changes) by reference-margin bin, one
    line per arm. Right: the reference's margins at tool-name (decision) tokens."""
    width, height = 9.0 * INCH, 3.4 * INCH
    d = Drawing(
        plot_id,
        width,
        height,
        "Flip rate by reference margin, and the reference's margins at tool-name tokens",
    )
    dist = margins.reference_decision_margins
    names = [_bin_label(lo, hi) for lo, hi in itertools.pairwise(margins.edges) if lo is not None]
    bins = [[_bin_label(b.lo, b.hi) for b in arm.flip_by_margin] for arm in margins.arms]
    labels = bins[-1] if bins else []
    turned = max((text_width(s, 7.0) for s in [*labels, *names]), default=0.0)
    bottom = height - (2 * TICK + turned + 4 + LINE + 4)
    label_y = bottom + 2 * TICK + turned + 4  # the axis labels, under the turned ticks
    rates = [100 * b.flip_rate for arm in margins.arms for b in arm.flip_by_margin if b.flip_rate]
    r_lo, r_hi = padded([*rates, 0.0])
    c_hi = padded([0.0, *dist.histogram])[1]
    r_ticks = y_ticks(r_lo, r_hi, bottom - TITLE - 4)
    c_ticks = y_ticks(0, c_hi, bottom - TITLE - 4)
    left_w = YLABEL + tick_width([f"{t:g}" for t in r_ticks]) + 6
    right_w = YLABEL + tick_width([f"{t:g}" for t in c_ticks]) + 6
    gap = 14.0
    panel_w = (width - left_w - right_w - gap - 8) / 2
    d.open_group("axes")
    left = Panel(d, left_w, TITLE + 4, panel_w, bottom - TITLE - 4)
    left.set_x(*padded([0.0, max(len(labels) - 1, 1)]))
    left.set_y(r_lo, r_hi)
    left.frame(
        range(len(labels)),
        r_ticks,
        xfmt=lambda v: labels[int(v)],
        xtick_size=7.0,
        xtick_rotate=True,
    )
    entries = []
    for i, arm in enumerate(margins.arms):
        style = Style(PALETTE[(i + 1) % len(PALETTE)], "o", 3.0)
        ys = [None if b.flip_rate is None else 100 * b.flip_rate for b in arm.flip_by_margin]
        left.polyline(range(len(ys)), ys, style)
        entries.append(LegendEntry(arm.arm, style))
    left.ylabel("flip rate, %", left_w - YLABEL + 2)
    left.title("Decisions flip where the margin is small")
    d.text(
        left.left + left.width / 2,
        label_y,
        "reference margin (top-1 − top-2 logit)",
        9.0,
        "middle",
        "top",
    )
    legend(d, entries, 0, left.top + 4, 1, 8.0, right=left.right - 4)
    d.close_group()
    d.open_group("axes")
    right = Panel(d, left_w + panel_w + gap + right_w, TITLE + 4, panel_w, bottom - TITLE - 4)
    n = len(dist.histogram)
    right.set_x(-0.4 - 0.05 * n, n - 0.6 + 0.05 * n)
    right.set_y(0, c_hi)
    right.frame(
        range(len(names)), c_ticks, xfmt=lambda v: names[int(v)], xtick_size=7.0, xtick_rotate=True
    )
    for x, count in enumerate(dist.histogram):
        right.vbar(x, 0.8, count, PALETTE[2])
    right.ylabel("tool-name tokens", right_w - YLABEL + 2)
    right.title(f"Margins at tool-name tokens (n = {dist.count})")
    d.text(right.left + right.width / 2, label_y, "reference margin", 9.0, "middle", "top")
    d.close_group()
    return d.render()


def repair_effect_figure(plot_id: str, cell: RepairCell) -> str:
    """Repair effect at the default K per arm (points, 95% CI); 0 = no effect."""
    width, height = 5.0 * INCH, (0.6 + 0.4 * max(1, len(cell.arms))) * INCH + XLABEL + TITLE
    d = Drawing(plot_id, width, height, f"Repair effect, {cell.model} · {cell.domain}")
    spans: list[tuple[int, float, float, float]] = []
    for y, arm in enumerate(cell.arms):
        iv = arm.effect
        if iv.value is None:
            continue
        lo = iv.ci_low if iv.ci_low is not None else iv.value
        hi = iv.ci_high if iv.ci_high is not None else iv.value
        spans.append((y, 100 * lo, 100 * iv.value, 100 * hi))
    left = tick_width([a.arm for a in cell.arms]) + 8
    d.open_group("axes")
    p = Panel(d, left, TITLE + 4, width - left - 12, height - TITLE - 4 - XLABEL - 4)
    lo, hi = padded([0.0, *(v for _, a, m, b in spans for v in (a, m, b))])
    p.set_x(lo, hi)
    p.set_y(len(cell.arms) - 0.5, -0.5)
    p.frame(
        fitting_ticks(lo, hi, p.width), range(len(cell.arms)), ylabels=[a.arm for a in cell.arms]
    )
    p.vline(0.0, "#555555")
    for y, a, m, b in spans:
        p.segment(a, y, b, y, "#333333")
        p.point(m, y, Style(PALETTE[4], "o", 5.0))
    p.xlabel("repair effect S_with − S_without, points (95% CI)")
    p.title(f"{cell.model} · {cell.domain}")
    d.close_group()
    return d.render()
