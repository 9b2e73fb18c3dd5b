"""The report's figures for each cell, as inline SVG strings (`svg.Drawing`, `axes.Panel`).

Why SVG written directly: the report must work offline from one file, so a plot library that
needs JavaScript (plotly, Vega) would have to be inlined (megabytes) and would run code in
the page; and these charts are lines, bands, points, bars and intervals, which a plot library
that lays out text by rendering it (matplotlib) would spend most of the report's time
on. A static SVG needs no script, renders the same everywhere, and is the same bytes run to
run; every label is escaped, so model-generated tool names can label points without
becoming markup.

Each function takes plain numbers (no analysis types) and returns `<svg ...>...</svg>`.
Rates and gaps come in as fractions and are drawn in percentage points. Sizes are in points
(72 to the inch), as the figures' sizes always were.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from flatscore.report.axes import (
    FONT_SIZE,
    PALETTE,
    TICK,
    TITLE_SIZE,
    LegendEntry,
    Panel,
    Style,
    colour,
    decade_ticks,
    fitting_ticks,
    legend,
    padded,
    series_style,
    tick_width,
    times,
    y_ticks,
)
from flatscore.report.svg import Drawing, finite, text_width

INCH = 72.0
LINE = 1.2 * FONT_SIZE
"""The height of a line of axis text."""
XAXIS = 2 * TICK + LINE
"""Below a panel: the ticks and their labels."""
XLABEL = XAXIS + LINE + 4
"""Below a panel: ticks, their labels and the axis label."""
YLABEL = LINE + 4
"""Left of the tick labels: the turned y label."""
TITLE = TITLE_SIZE * 1.2 + 8
"""Above a panel: its title."""


@dataclass(frozen=True)
class Band:
    """One line with an optional confidence band, e.g. S(K) of an arm or Gap(K) of a pair."""

    label: str
    x: Sequence[float]
    y: Sequence[float | None]
    low: Sequence[float | None] | None = None
    high: Sequence[float | None] | None = None


@dataclass(frozen=True)
class Interval:
    """A point estimate with an optional CI, e.g. one channel's amplification."""

    label: str
    value: float | None
    low: float | None = None
    high: float | None = None
    note: str = "no ratio"  # written in place of a point that cannot be drawn


@dataclass(frozen=True)
class GroupedBars:
    """Bars: one group per category, one bar per series (values are fractions)."""

    categories: Sequence[str]
    series: dict[str, Sequence[float]] = field(default_factory=dict)


def _offsets(n: int, step: float) -> list[float]:
    """Small x offsets that keep n coinciding series apart (centred on 0)."""
    return [step * (i - (n - 1) / 2) for i in range(n)]


def _pts(values: Sequence[float | None]) -> list[float | None]:
    return [None if v is None else 100.0 * v for v in values]


def _values(bands: Sequence[Band], shifts: Sequence[float]) -> tuple[list[float], list[float]]:
    """Every x (shifted) and every y (points, bands included) the bands draw."""
    xs = [x + s for b, s in zip(bands, shifts, strict=True) for x in b.x]
    ys = [
        v
        for b in bands
        for series in (b.y, b.low or [], b.high or [])
        for v in _pts(series)
        if v is not None and math.isfinite(v)
    ]
    return xs, ys


def _draw_bands(
    panel: Panel, bands: Sequence[Band], shifts: Sequence[float], colour_offset: int = 0
) -> None:
    """Lines with their bands; each series shifted sideways by its shift (arms whose values
    coincide stay visible side by side)."""
    for i, band in enumerate(bands):
        style = series_style(i + colour_offset)
        if band.low is not None and band.high is not None:
            panel.band(band.x, _pts(band.low), _pts(band.high), style.colour)
        panel.polyline([x + shifts[i] for x in band.x], _pts(band.y), style)


def _k_marks(panel: Panel, marks: Sequence[tuple[int | None, str]]) -> None:
    """Dashed verticals at the named budgets, each named up its left side."""
    for k, name in marks:
        if k is None or not panel.x.inside(k):
            continue
        panel.vline(k, "#999999", 0.8, (3.0, 1.3))
        panel.d.text(
            panel.x(k) - 3,
            panel.top + 0.02 * panel.height,
            f"{name} K={k}",
            7.0,
            "end",
            "bottom",
            "#666666",
            rotate=True,
        )


def _band_legend(bands: Sequence[Band]) -> list[LegendEntry]:
    return [LegendEntry(b.label, series_style(i)) for i, b in enumerate(bands)]


def budget_figure(
    plot_id: str,
    success: Sequence[Band],
    gaps: Sequence[Band],
    default_k: int | None,
    small_k: int | None,
) -> str:
    """S(K) per arm (left) and Gap(K) per arm vs the reference (right), with CI bands; one
    legend for both, below the plots (never over the lines); coinciding arms are shifted a
    little sideways.

    The picture of the study: curves that meet at the default K and part at small K.
    """
    n = max(len(success), 1)
    columns = min(n, 4)
    rows = math.ceil(len(success) / columns) if success else 0
    width, height = 9.0 * INCH, (3.4 + 0.22 * math.ceil(n / 4)) * INCH
    d = Drawing(
        plot_id, width, height, "Success under each error budget, and the gap to the reference"
    )
    legend_h = rows * 1.4 * 8 + 6
    spread = 0.05 if n > 1 else 0.0
    shifts_s, shifts_g = _offsets(len(success), spread), _offsets(len(gaps), spread)
    xs_s, _ = _values(success, shifts_s)
    xs_g, ys_g = _values(gaps, shifts_g)
    top, bottom = TITLE + 4, height - legend_h - XLABEL - 4
    g_lo, g_hi = padded([*ys_g, 0.0])
    g_ticks = y_ticks(g_lo, g_hi, bottom - top)
    s_ticks = y_ticks(-2, 102, bottom - top)
    left_w = YLABEL + tick_width([f"{t:g}" for t in s_ticks]) + 6
    right_w = YLABEL + tick_width([f"{t:g}".replace("-", "−") for t in g_ticks]) + 6
    gap = 14.0
    panel_w = (width - left_w - right_w - gap - 8) / 2
    marks = ((default_k, "default"), (small_k, "small"))
    for which, (x0, bands, xs, shifts) in enumerate(
        (
            (left_w, success, xs_s, shifts_s),
            (left_w + panel_w + gap + right_w, gaps, xs_g, shifts_g),
        )
    ):
        d.open_group("axes")
        p = Panel(d, x0, top, panel_w, bottom - top)
        x_lo, x_hi = padded(xs or [0.0, 1.0])
        p.set_x(x_lo, x_hi)
        if which == 0:
            p.set_y(-2, 102)
            p.frame(fitting_ticks(x_lo, x_hi, panel_w, integer=True), s_ticks)
            _draw_bands(p, bands, shifts)
            p.xlabel("error budget K (failed calls allowed)")
            p.ylabel("success S(K), %", left_w - YLABEL + 2)
            p.title("Success under each error budget")
        else:
            p.set_y(g_lo, g_hi)
            p.frame(fitting_ticks(x_lo, x_hi, panel_w, integer=True), g_ticks)
            _draw_bands(p, bands, shifts, colour_offset=1)
            p.hline(0.0, "#555555")
            p.xlabel("error budget K")
            p.ylabel("Gap(K) = S_ref − S_arm, points", right_w - YLABEL + 2)
            p.title("Gap to the reference")
        _k_marks(p, marks)
        d.close_group()
    legend(d, _band_legend(success), width / 2, height - legend_h, columns)
    return d.render()


ROW_IN = 0.24
"""Inches per row of a horizontal plot (a channel, an arm): figures grow with their rows."""
FACET_COLUMNS = 3
"""Amplification panels per row of the figure (one panel per compared arm)."""


def channel_figure(
    plot_id: str, rates: GroupedBars, amplification: dict[str, Sequence[Interval]]
) -> str:
    """Channel rates per arm (top: % of agent tool calls, one bar per arm in each channel's
    row) and amplification against the reference with CIs (below: one panel per compared arm,
    log scale, 1 = unchanged). Every row has its own height, so the figure grows with the
    number of arms and channels; the legend sits above the bars."""
    arms = list(amplification)
    cols = min(FACET_COLUMNS, max(len(arms), 1))
    grid = math.ceil(len(arms) / cols) if arms else 0
    n_series = max(len(rates.series), 1)
    bar_rows = len(rates.categories) * max(1.0, 0.4 * n_series)
    facet_rows = max((len(v) for v in amplification.values()), default=0)
    top_h = (ROW_IN * max(bar_rows, 3) + 0.9 + 0.2 * math.ceil(n_series / 4)) * INCH
    facet_h = (ROW_IN * max(facet_rows, 3) + 0.9) * INCH
    width = 9.0 * INCH
    d = Drawing(
        plot_id,
        width,
        top_h + grid * facet_h,
        "Failed calls by channel, and their amplification against the reference",
    )
    entries = [
        LegendEntry(name, Style(colour(i), "s", 7.0), line=False)
        for i, name in enumerate(rates.series)
    ]
    legend_h = legend(d, entries, 0, 4, min(n_series, 4), right=width - 8) if entries else 0
    m = len(rates.categories)
    left = tick_width(list(rates.categories)) + 8
    d.open_group("axes")
    p = Panel(
        d, left, 4 + legend_h + TITLE, width - left - 12, top_h - 4 - legend_h - TITLE - XLABEL
    )
    values = [v for vs in rates.series.values() for v in _pts(vs) if v is not None]
    x_hi = padded([0.0, *values])[1]
    p.set_x(0.0, x_hi)
    p.set_y(m - 0.5 + 0.05 * m, -0.5 - 0.05 * m)
    p.frame(fitting_ticks(0.0, x_hi, p.width), range(m), ylabels=rates.categories)
    thickness = 0.8 / n_series
    for i, (name, series) in enumerate(rates.series.items()):
        del name
        for y, v in enumerate(_pts(series)):
            if v is not None and v > 0:
                p.hbar(y - 0.4 + thickness * (i + 0.5), thickness, v, colour(i))
    p.xlabel("% of agent tool calls")
    p.title("Failed calls by channel")
    d.close_group()
    if arms:
        facet_top = top_h
        d.text(
            0.01 * width,
            facet_top + 4,
            "Amplification (arm rate ÷ reference rate)",
            TITLE_SIZE,
            "start",
            "top",
        )
        labels = [it.label for items in amplification.values() for it in items]
        label_w = tick_width(labels) + 8
        gap = 16.0
        facet_w = (width - label_w - 12 - gap * (cols - 1)) / cols
        head = TITLE_SIZE * 1.2 + 8 + 8 * 1.2 + 8
        for k, arm in enumerate(arms):
            r, c = divmod(k, cols)
            d.open_group("axes")
            x0 = label_w + c * (facet_w + gap)
            y0 = facet_top + r * facet_h + (head if r == 0 else 8 * 1.2 + 10)
            last_row = k >= len(arms) - cols
            y1 = facet_top + (r + 1) * facet_h - (XLABEL if last_row else XAXIS) - 2
            p = Panel(d, x0, y0, facet_w, y1 - y0)
            _draw_intervals(p, amplification[arm], labels=c == 0, xlabel=last_row)
            p.title(_short(arm, 30), 8.0)
            d.close_group()
    return d.render()


def _draw_intervals(
    panel: Panel, items: Sequence[Interval], labels: bool = True, xlabel: bool = True
) -> None:
    """One row per item: the ratio and its CI on a log axis (decades only, so the ticks
    never run together); an interval with no upper bound ends in an arrowhead at the edge."""
    if not items:
        panel.empty("no comparison")
        return
    shown = [it for it in items if finite(it.value) and it.value is not None and it.value > 0]
    values = [v for it in shown for v in (it.value, it.low, it.high) if v and finite(v)]
    top = max(values, default=2.0) * 1.6
    rows: list[tuple[int, Interval, float, float, bool]] = []
    for y, it in enumerate(items):
        if it in shown:
            assert it.value is not None
            lo = it.low if it.low is not None and it.low > 0 else it.value
            unbounded = it.low is not None and (it.high is None or not math.isfinite(it.high))
            hi = top if unbounded else (it.high if it.high is not None else it.value)
            rows.append((y, it, lo, hi, unbounded))
    x_lo, x_hi = padded([1.0, *(v for _, _, lo, hi, _ in rows for v in (lo, hi))], log=True)
    panel.set_x(x_lo, x_hi, log=True)
    panel.set_y(len(items) - 0.5, -0.5)
    panel.frame(
        decade_ticks(x_lo, x_hi, most=6),
        range(len(items)),
        xfmt=times,
        ylabels=[it.label for it in items],
        show_ylabels=labels,
    )
    panel.vline(1.0, "#555555")
    for y, it, lo, hi, unbounded in rows:
        assert it.value is not None
        panel.segment(lo, y, hi, y, "#333333")
        panel.point(it.value, y, Style(PALETTE[4], "o", 5.0))
        if unbounded:  # no upper bound (reference count near zero): an arrowhead, no text
            panel.point(hi, y, Style("#333333", ">", 5.0))
    for y, it in enumerate(items):
        if it not in shown:
            panel.note(0.02, y, _short(it.note, 26), 6.5)
    if xlabel:
        panel.xlabel("ratio (log), 95% CI")


def rank_figure(
    plot_id: str,
    ref_counts: dict[str, int],
    arm_counts: dict[str, int],
    ref_label: str,
    arm_label: str,
    rho: float | None,
    novel_fraction: float | None,
    label_top: int = 6,
) -> str:
    """Rank of each hallucinated tool name in the reference vs in the arm.

    Points on the diagonal: the arm fails in the same places, only more often. Names the
    reference never produced sit on the right edge (novel).
    """
    names = sorted(set(ref_counts) | set(arm_counts))
    ref_rank = _ranks({n: ref_counts.get(n, 0) for n in names})
    arm_rank = _ranks({n: arm_counts.get(n, 0) for n in names})
    width, height = 4.6 * INCH, 4.2 * INCH
    d = Drawing(
        plot_id,
        width,
        height,
        f"Rank of each hallucinated tool name in {ref_label} and in {arm_label}",
    )
    d.open_group("axes")
    p = Panel(d, 0.14 * width, 0.08 * height, 0.83 * width, 0.72 * height)
    rho_text = "n/a" if rho is None else f"{rho:.2f}"
    novel_text = "n/a" if novel_fraction is None else f"{100 * novel_fraction:.1f}%"
    p.title(f"ρ = {rho_text}, novel = {novel_text}")
    p.xlabel(f"rank in {_short(ref_label)} (1 = most frequent)")
    p.ylabel(f"rank in {_short(arm_label)}", 2 * TICK + text_width("00", FONT_SIZE) + 6)
    labels: list[tuple[str, float, float]] = []
    if names:
        top = len(names) + 1
        p.set_x(0.5, top)
        p.set_y(0.5, top)
        p.frame(
            fitting_ticks(0.5, top, p.width, integer=True),
            y_ticks(0.5, top, p.height, integer=True),
        )
        p.segment(1, 1, top, top, "#aaaaaa", 0.8, (3.7, 1.6))
        novel = [n for n in names if ref_counts.get(n, 0) == 0]
        known = [n for n in names if ref_counts.get(n, 0) > 0]
        entries = []
        for group, col, label in (
            (known, PALETTE[2], "seen in reference"),
            (novel, PALETTE[4], "novel"),
        ):
            if not group:
                continue
            entries.append(LegendEntry(label, Style(col, "o", 6.0), line=False))
            for n in group:
                size = math.sqrt(12 + 4 * math.sqrt(arm_counts.get(n, 0) + ref_counts.get(n, 0)))
                p.point(ref_rank[n], arm_rank[n], Style(col, "o", size), opacity=0.75)
        legend(d, entries, width / 2, height - 1.4 * 7 - 4, 2, 7.0)
        by_volume = sorted(names, key=lambda n: (-(arm_counts.get(n, 0) + ref_counts.get(n, 0)), n))
        labels = [(_short(n), ref_rank[n], arm_rank[n]) for n in by_volume[:label_top]]
    else:
        p.frame()
        p.empty("no hallucinated tool names")
    for text, x, y in labels:  # last: a label over another text is left out
        if p.x(x) + 4 + text_width(text, 7.0) <= width - 2:
            p.label(x, y, text, 7.0, dx=4, dy=3, optional=True)
        else:  # it would run past the figure's right edge: written leftwards of its point
            p.label(x, y, text, 7.0, dx=-4, dy=3, anchor="end", optional=True)
    d.close_group()
    return d.render()


def passk_figure(plot_id: str, curves: Sequence[Band]) -> str:
    """pass^k per arm: the chance that all k trials of a task succeed."""
    rows = math.ceil(len(curves) / 3)
    width, height = 4.6 * INCH, (3.0 + 0.2 * rows) * INCH
    d = Drawing(plot_id, width, height, "pass^k per arm")
    d.open_group("axes")
    bottom = (0.6 + 0.2 * rows) * INCH
    p = Panel(d, 0.6 * INCH, 0.15 * INCH, 0.97 * width - 0.6 * INCH, height - bottom - 0.15 * INCH)
    shifts = _offsets(len(curves), 0.04 if len(curves) > 1 else 0.0)
    xs, _ = _values(curves, shifts)
    x_lo, x_hi = padded(xs or [0.0, 1.0])
    p.set_x(x_lo, x_hi)
    p.set_y(-2, 102)
    xticks = list(curves[0].x) if curves and curves[0].x else []
    p.frame(xticks, y_ticks(-2, 102, p.height))
    _draw_bands(p, curves, shifts)
    p.xlabel("k (trials that must all succeed)")
    p.ylabel("pass^k, %", 2 * TICK + text_width("100", FONT_SIZE) + 6)
    d.close_group()
    if curves:
        legend(d, _band_legend(curves), width / 2, height - rows * 1.4 * 8 - 4, min(len(curves), 3))
    return d.render()


@dataclass(frozen=True)
class FloorPanel:
    """One diagnostic of every arm against the reference's noise floor: `values` per arm
    with optional intervals, the floor as a line and/or a shaded band (same units), and
    `reach`, the band out to where an arm counts as beyond the floor (lighter)."""

    title: str
    arms: Sequence[str]
    values: Sequence[float | None]
    low: Sequence[float | None] | None = None
    high: Sequence[float | None] | None = None
    floor: float | None = None
    band: tuple[float, float] | None = None
    reach: tuple[float, float] | None = None
    log: bool = False
    limits: tuple[float, float] | None = None
    """The values the diagnostic can take (ρ: [−1, 1]): points and interval ends beyond them
    (a floor plus an excess interval can reach past −1) are drawn at the limit, and the axis
    stops there."""

    def clipped(self) -> FloorPanel:
        """This panel with values and interval ends inside `limits`."""
        if self.limits is None:
            return self
        lo, hi = self.limits

        def clip(xs: Sequence[float | None] | None) -> list[float | None] | None:
            return None if xs is None else [None if x is None else min(max(x, lo), hi) for x in xs]

        values = clip(self.values)
        assert values is not None
        return replace(self, values=values, low=clip(self.low), high=clip(self.high))


def floor_figure(plot_id: str, panels: Sequence[FloorPanel]) -> str:
    """Each arm's diagnostics (points, one row per arm) against the reference compared with
    itself (grey line or band; a lighter band out to where an arm counts as beyond the
    floor, its standard error included): inside the grey, chance alone could have produced
    it. Arms are rows (named once, on the left), so the figure grows with them and no name is
    slanted over its neighbour."""
    n_arms = max((len(p.arms) for p in panels), default=1)
    width, height = 9.0 * INCH, (ROW_IN * max(n_arms, 3) + 1.1) * INCH
    d = Drawing(
        plot_id, width, height, "Each arm's diagnostics against the reference's noise floor"
    )
    names = [_short(a, 18) for a in (panels[0].arms if panels else [])]
    left = tick_width(names) + 8
    gap = 22.0
    count = max(len(panels), 1)
    panel_w = (width - left - 12 - gap * (count - 1)) / count
    top, bottom = 8 * 1.2 + 12, height - XAXIS - 6
    if not panels:
        d.text(width / 2, height / 2, "no noise floor", FONT_SIZE, "middle", "center")
    for i, fp in enumerate(q.clipped() for q in panels):
        d.open_group("axes")
        p = Panel(d, left + i * (panel_w + gap), top, panel_w, bottom - top)
        ys = list(range(len(fp.arms)))
        xs = [v for v in fp.values if v is not None and math.isfinite(v)]
        ends = [v for v in (*(fp.low or []), *(fp.high or [])) if v is not None]
        extra = [*(fp.band or ()), *(fp.reach or ()), *([fp.floor] if fp.floor is not None else [])]
        log = fp.log and bool(xs) and all(v > 0 for v in xs)
        lo, hi = padded([*xs, *ends, *extra], log=log)
        if fp.limits is not None:
            pad = 0.04 * (fp.limits[1] - fp.limits[0])
            lo, hi = max(lo, fp.limits[0] - pad), min(hi, fp.limits[1] + pad)
        p.set_x(lo, hi, log=log)
        p.set_y(len(ys) - 0.5, -0.5)
        ticks = decade_ticks(lo, hi, (1.0, 2.0, 5.0), most=2) if log else None
        if ticks is not None and len(ticks) > 4:
            ticks = decade_ticks(lo, hi, (1.0,), most=4)
        p.frame(
            ticks if ticks is not None else fitting_ticks(lo, hi, panel_w, most=4),
            ys,
            xfmt=times if log else _plain,
            ylabels=names,
            show_ylabels=i == 0,
        )
        if fp.reach is not None:
            p.xspan(*fp.reach, "#bbbbbb", 0.2)
        if fp.band is not None:
            p.xspan(*fp.band, "#bbbbbb", 0.45)
        if fp.floor is not None:
            p.vline(fp.floor, "#555555", 1.0, (3.7, 1.6))
        for y, v in zip(ys, fp.values, strict=True):
            if v is None or not math.isfinite(v):
                p.note(0.5, y, "n/a", 7.0, "middle")
        if fp.low is not None and fp.high is not None:
            for y, a, b in zip(ys, fp.low, fp.high, strict=True):
                if a is not None and b is not None:
                    p.segment(a, y, b, y, "#333333")
        for y, v in zip(ys, fp.values, strict=True):
            if v is not None and math.isfinite(v):
                p.point(v, y, Style(PALETTE[4], "o", 5.0))
        p.title(fp.title, 8.0)
        d.close_group()
    return d.render()


def _plain(v: float) -> str:
    return f"{v:g}".replace("-", "−")


def _ranks(counts: dict[str, int]) -> dict[str, float]:
    """Rank 1 = most frequent; ties share their average rank (as Spearman's ρ does)."""
    ordered = sorted(counts, key=lambda n: (-counts[n], n))
    ranks: dict[str, float] = {}
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and counts[ordered[j + 1]] == counts[ordered[i]]:
            j += 1
        for n in ordered[i : j + 1]:
            ranks[n] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _short(text: str, limit: int = 28) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
