"""The cost figure: each arm's success at the default and the tight budget against its cost
per successful episode, one panel per cell (rows from `cost_rows.quality_cost_rows`)."""

from __future__ import annotations

import math

from flatscore.analysis.result import AnalysisResult
from flatscore.report.axes import (
    PALETTE,
    LegendEntry,
    Panel,
    Style,
    decade_ticks,
    fitting_ticks,
    legend,
    padded,
    tick_width,
    y_ticks,
)
from flatscore.report.cost_rows import QualityCost, quality_cost_rows, tight_k
from flatscore.report.plots import INCH, TITLE, XLABEL, YLABEL
from flatscore.report.svg import Drawing

GREY = "#555555"


def cost_figure(plot_id: str, analysis: AnalysisResult) -> str:
    """One panel per cell: success at the default K (filled) and the tight K (open), joined,
    against cost per successful episode; each arm labelled with its amplified channels."""
    rows = quality_cost_rows(analysis)
    cells = list(dict.fromkeys((r.model, r.domain) for r in rows))
    k_def, k_tight = analysis.settings.default_K, tight_k(analysis)
    n_arms = len({r.arm for r in rows})
    width = min(4.2 * INCH * max(1, len(cells)), 12.6 * INCH)
    height = (3.4 + 0.2 * math.ceil((n_arms + 2) / 5)) * INCH
    d = Drawing(plot_id, width, height, "Success against cost per successful episode")
    columns = min(n_arms + 2, 5)
    legend_rows = math.ceil((n_arms + 2) / columns)
    legend_h = legend_rows * 1.4 * 7 + 6
    top, bottom = TITLE + 4, height - legend_h - XLABEL - 4
    s_ticks = y_ticks(-5, 105, bottom - top)
    left = YLABEL + tick_width([f"{t:g}" for t in s_ticks]) + 6
    gap = 12.0
    count = max(1, len(cells))
    panel_w = (width - 8 - count * left - (count - 1) * gap) / count
    arm_colours: dict[str, str] = {}
    labels: list[tuple[Panel, float, float, str, str, float, bool]] = []
    for j, (model, domain) in enumerate(cells):
        d.open_group("axes")
        p = Panel(d, left + j * (panel_w + gap + left), top, panel_w, bottom - top)
        points: list[tuple[int, QualityCost, float]] = []
        units = ""
        for i, r in enumerate(x for x in rows if (x.model, x.domain) == (model, domain)):
            x, units = r.per_success
            if x is not None and math.isfinite(x) and x > 0:
                points.append((i, r, x))
        xs = [x for _, _, x in points]
        log = bool(xs) and max(xs) > 20 * min(xs)
        lo, hi = padded(xs or [0.0, 1.0], log=log)
        p.set_x(lo, hi, log=log)
        p.set_y(-5, 105)
        x_ticks = decade_ticks(lo, hi, most=6) if log else fitting_ticks(lo, hi, panel_w)
        p.frame(x_ticks, s_ticks, xfmt=lambda v: f"{v:g}")
        for i, r, x in points:
            col = PALETTE[i % len(PALETTE)]
            arm_colours.setdefault(r.arm, col)
            ys = [None if v is None else 100 * v for v in (r.s_default, r.s_tight)]
            if ys[0] is not None and ys[1] is not None:
                p.segment(x, ys[0], x, ys[1], col, 1.2)
            if ys[0] is not None:
                p.point(x, ys[0], Style(col, "o", 6.0))
            if ys[1] is not None:
                p.point(x, ys[1], Style(col, "o", 6.0, hollow=True))
            label = r.arm + (f" ({r.amplified} amplified)" if r.amplified else "")
            # labels fan out downwards by arm (arms at one point stay readable), and sit
            # left of the costliest arm so they stay inside the panel
            right = len(xs) > 1 and x == max(xs)
            dy = (6, -4, -14)[i % 3]
            if ys[0] is None or ys[0] < 15:  # near the floor (or missing): above the point
                dy = abs(dy) + 6
            if ys[0] is not None:
                labels.append((p, x, ys[0], label, col, dy, right))
        p.title(f"{model} · {domain}")
        p.ylabel("success, %", left - YLABEL + 2)
        p.xlabel(f"cost per successful episode ({units or 'n/a'})")
        d.close_group()
    entries = [
        LegendEntry(f"S(K={k_def})", Style(GREY, "o", 6.0), line=False),
        LegendEntry(f"S(K={k_tight})", Style(GREY, "o", 6.0, hollow=True), line=False),
        # a point whose label would overlap keeps its colour
        *(LegendEntry(arm, Style(c, "s", 6.0), line=False) for arm, c in arm_colours.items()),
    ]
    legend(d, entries, width / 2, height - legend_h, columns, 7.0)
    for panel, at_x, at_y, text, col, shift, on_left in labels:
        # last: of arms at one point, the first keeps its label, the rest their colour
        panel.label(
            at_x,
            at_y,
            text,
            7.0,
            dx=-6 if on_left else 6,
            dy=shift,
            col=col,
            anchor="end" if on_left else "start",
            optional=True,
        )
    return d.render()
