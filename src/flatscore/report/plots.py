"""The report's figures, as inline SVG strings drawn with matplotlib.

Why matplotlib SVG: the report must work offline from one file, so a plot library that needs
JavaScript (plotly, Vega) would have to be inlined (megabytes) and would run code in the
page. A static SVG needs no script, renders the same everywhere, and with a fixed
`svg.hashsalt`, no date metadata and text kept as text (`svg.fonttype = none`) the bytes are
identical run to run. matplotlib also escapes every label it writes, so model-generated tool
names can label points without becoming markup.

Each function takes plain numbers (no analysis types) and returns `<svg ...>...</svg>`.
Rates and gaps come in as fractions and are drawn in percentage points.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import matplotlib
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

# Colour-blind-safe palette (Okabe-Ito); the reference arm always takes the first colour.
PALETTE = ("#000000", "#E69F00", "#56B4E9", "#009E73", "#D55E00", "#CC79A7", "#0072B2", "#F0E442")


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


@contextmanager
def _style(plot_id: str) -> Iterator[None]:
    """Deterministic, script-free SVG: the salt also keeps clip-path ids unique per plot."""
    with matplotlib.rc_context(
        {
            "svg.hashsalt": f"flatscore-{plot_id}",
            "svg.fonttype": "none",
            "svg.id": f"plot-{plot_id}",
            "text.parse_math": False,
            "font.size": 9,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "legend.frameon": False,
        }
    ):
        yield


_NO_METADATA = {"Date": None, "Creator": None, "Format": None, "Type": None}
_TAG = re.compile(r"<[^>]*>")
_ID_REF = re.compile(r'(\sid="|url\(#|href="#)(?!plot-)')


def _to_svg(fig: Figure, plot_id: str) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata=_NO_METADATA)
    text = buf.getvalue()
    # Drop the XML prolog and DOCTYPE: the SVG is inlined into an HTML document.
    text = text[text.index("<svg") :].strip()
    # matplotlib numbers its element ids per figure (figure_1, axes_1, ...): prefix them so
    # several plots in one page never share an id. Only tags are rewritten (labels are text,
    # and matplotlib escapes `<` in text, so a label can never look like a tag).
    prefix = f"plot-{plot_id}-"
    return _TAG.sub(lambda m: _ID_REF.sub(lambda r: r.group(1) + prefix, m.group(0)), text)


def drop_overlapping(fig: Figure, candidates: Sequence[Text]) -> None:
    """Remove each of `candidates` (in priority order) whose box overlaps another text of the
    figure (ticks, titles, legends, the labels kept before it): a label that cannot be read
    is left out rather than printed over another."""
    if not candidates:
        return
    FigureCanvasAgg(fig)
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    fig.draw_without_rendering()
    pending = set(map(id, candidates))
    fixed = [
        t.get_window_extent(renderer).expanded(1.04, 1.1)
        for t in fig.findobj(Text)
        if id(t) not in pending and t.get_visible() and t.get_text().strip()
    ]
    for t in candidates:
        box = t.get_window_extent(renderer).expanded(1.04, 1.1)
        if any(box.overlaps(other) for other in fixed):
            t.remove()
        else:
            fixed.append(box)


def _offsets(n: int, step: float) -> list[float]:
    """Small x offsets that keep n coinciding series apart (centred on 0)."""
    return [step * (i - (n - 1) / 2) for i in range(n)]


def _pts(values: Sequence[float | None]) -> list[float]:
    return [math.nan if v is None else 100.0 * v for v in values]


def _colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
DASHES = ("-", "--", ":", "-.", (0, (5, 1, 1, 1)), (0, (1, 2)), (0, (6, 2)), (0, (2, 1)))
"""Per series: lines that coincide (an arm identical to the reference) stay visible — the
later one is dashed over the earlier and each has its own marker."""


def _draw_bands(
    ax: Axes, bands: Sequence[Band], colour_offset: int = 0, spread: float = 0.0
) -> None:
    """Lines with their bands; `spread` shifts each series sideways by a fraction of an x
    step, so arms whose values coincide stay visible side by side."""
    shifts = _offsets(len(bands), spread)
    for i, band in enumerate(bands):
        colour = _colour(i + colour_offset)
        j = (i + colour_offset) % len(MARKERS)
        ax.plot(
            [x + shifts[i] for x in band.x],
            _pts(band.y),
            marker=MARKERS[j],
            ms=4 if j else 5,
            mfc="none" if j else colour,
            ls=DASHES[j],
            lw=1.6,
            color=colour,
            label=band.label,
        )
        if band.low is not None and band.high is not None:
            ax.fill_between(band.x, _pts(band.low), _pts(band.high), color=colour, alpha=0.15, lw=0)


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
    with _style(plot_id):
        fig = Figure(figsize=(9.0, 3.4 + 0.22 * math.ceil(n / 4)), layout="constrained")
        left, right = fig.subplots(1, 2)
        spread = 0.05 if n > 1 else 0.0
        _draw_bands(left, success, spread=spread)
        left.set(xlabel="error budget K (failed calls allowed)", ylabel="success S(K), %")
        left.set_title("Success under each error budget", loc="left")
        left.set_ylim(-2, 102)
        _draw_bands(right, gaps, colour_offset=1, spread=spread)
        right.axhline(0.0, color="#555555", lw=0.8)
        right.set(xlabel="error budget K", ylabel="Gap(K) = S_ref − S_arm, points")
        right.set_title("Gap to the reference", loc="left")
        for ax in (left, right):
            for k, name in ((default_k, "default"), (small_k, "small")):
                if k is not None:
                    ax.axvline(k, color="#999999", lw=0.8, ls="--")
                    ax.annotate(
                        f"{name} K={k}",
                        (k, 0.98),
                        xycoords=("data", "axes fraction"),
                        textcoords="offset points",
                        xytext=(-3, 0),
                        fontsize=7,
                        color="#666666",
                        rotation=90,
                        ha="right",
                        va="top",
                    )
        handles, labels = left.get_legend_handles_labels()
        if handles:
            fig.legend(handles, labels, fontsize=8, loc="outside lower center", ncols=min(n, 4))
        return _to_svg(fig, plot_id)


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
    top_h = ROW_IN * max(bar_rows, 3) + 0.9 + 0.2 * math.ceil(n_series / 4)
    facet_h = ROW_IN * max(facet_rows, 3) + 0.9
    with _style(plot_id):
        fig = Figure(figsize=(9.0, top_h + grid * facet_h), layout="constrained")
        top, bottom = fig.subfigures(  # type: ignore[misc]  # an array of two subfigures
            2, 1, height_ratios=[top_h, max(grid * facet_h, 0.01)]
        )
        left = top.subplots()
        height = 0.8 / n_series
        ys = range(len(rates.categories))
        for i, (name, values) in enumerate(rates.series.items()):
            offsets = [y - 0.4 + height * (i + 0.5) for y in ys]
            left.barh(offsets, _pts(values), height=height, color=_colour(i), label=name)
        left.set_yticks(list(ys), list(rates.categories))
        left.invert_yaxis()
        left.set_xlabel("% of agent tool calls")
        left.set_title("Failed calls by channel", loc="left")
        if rates.series:
            top.legend(fontsize=8, loc="outside upper right", ncols=min(n_series, 4))
        if arms:
            axes = bottom.subplots(grid, cols, squeeze=False, sharey=True)
            for k, ax in enumerate(axes.flat):
                if k >= len(arms):
                    ax.set_axis_off()
                    continue
                _draw_intervals(ax, amplification[arms[k]], labels=k % cols == 0)
                ax.set_title(_short(arms[k], 30), loc="left", fontsize=8)
                if k < len(arms) - cols:
                    ax.set_xlabel("")
            bottom.suptitle("Amplification (arm rate ÷ reference rate)", x=0.01, ha="left")
        return _to_svg(fig, plot_id)


def _draw_intervals(ax: Axes, items: Sequence[Interval], labels: bool = True) -> None:
    """One row per item: the ratio and its CI on a log axis (decades only, so the ticks
    never run together); an interval with no upper bound ends in an arrowhead at the edge."""
    shown = [
        it for it in items if it.value is not None and it.value > 0 and math.isfinite(it.value)
    ]
    ys = list(range(len(items)))
    if not items:
        ax.annotate("no comparison", (0.5, 0.5), xycoords="axes fraction", ha="center")
        ax.set_axis_off()
        return
    ax.set_yticks(ys, [it.label for it in items])
    ax.tick_params(axis="y", labelleft=labels)  # facets share rows: named on the left only
    ax.set_ylim(len(items) - 0.5, -0.5)
    ax.axvline(1.0, color="#555555", lw=0.8)
    values = [v for it in shown for v in (it.value, it.low, it.high) if v and math.isfinite(v)]
    top = max(values, default=2.0) * 1.6
    for y, it in zip(ys, items, strict=True):
        if it not in shown:
            ax.annotate(
                _short(it.note, 26),
                (0.02, y),
                xycoords=("axes fraction", "data"),
                va="center",
                fontsize=6.5,
                color="#666666",
            )
            continue
        assert it.value is not None
        lo = it.low if it.low is not None and it.low > 0 else it.value
        unbounded = it.low is not None and (it.high is None or not math.isfinite(it.high))
        hi = top if unbounded else (it.high if it.high is not None else it.value)
        ax.plot([lo, hi], [y, y], color="#333333", lw=1.4)
        ax.plot([it.value], [y], "o", color=PALETTE[4], ms=5)
        if unbounded:  # no upper bound (reference count near zero): an arrowhead, no text
            ax.plot([hi], [y], marker=">", color="#333333", ms=5)
    if shown:
        ax.set_xscale("log")
        # Plain tick text: mathtext is off (model text must never be parsed as markup).
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0,)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"×{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("ratio (log), 95% CI")


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
    with _style(plot_id):
        # Fixed margins, no layout engine: one draw fewer per plot (a report draws one of
        # these per arm); the labels are short (`_short`) and the legend sits under the axes.
        fig = Figure(figsize=(4.6, 4.2))
        fig.subplots_adjust(left=0.14, right=0.97, top=0.92, bottom=0.2)
        ax = fig.subplots()
        if names:
            top = len(names) + 1
            ax.plot([1, top], [1, top], color="#aaaaaa", lw=0.8, ls="--")
            novel = [n for n in names if ref_counts.get(n, 0) == 0]
            known = [n for n in names if ref_counts.get(n, 0) > 0]
            sizes = {
                n: 12 + 4 * math.sqrt(arm_counts.get(n, 0) + ref_counts.get(n, 0)) for n in names
            }
            for group, colour, label in (
                (known, PALETTE[2], "seen in reference"),
                (novel, PALETTE[4], "novel"),
            ):
                if group:
                    ax.scatter(
                        [ref_rank[n] for n in group],
                        [arm_rank[n] for n in group],
                        s=[sizes[n] for n in group],
                        color=colour,
                        alpha=0.75,
                        label=label,
                    )
            by_volume = sorted(
                names, key=lambda n: (-(arm_counts.get(n, 0) + ref_counts.get(n, 0)), n)
            )
            labels = [
                ax.annotate(
                    _short(n),
                    (ref_rank[n], arm_rank[n]),
                    textcoords="offset points",
                    xytext=(4, 3),
                    fontsize=7,
                )
                for n in by_volume[:label_top]
            ]
            ax.set_xlim(0.5, top)
            ax.set_ylim(0.5, top)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            fig.legend(fontsize=7, loc="lower center", ncols=2)
        else:
            labels = []
            ax.annotate(
                "no hallucinated tool names", (0.5, 0.5), xycoords="axes fraction", ha="center"
            )
        ax.set_xlabel(f"rank in {_short(ref_label)} (1 = most frequent)")
        ax.set_ylabel(f"rank in {_short(arm_label)}")
        rho_text = "n/a" if rho is None else f"{rho:.2f}"
        novel_text = "n/a" if novel_fraction is None else f"{100 * novel_fraction:.1f}%"
        ax.set_title(f"ρ = {rho_text}, novel = {novel_text}", loc="left")
        drop_overlapping(fig, labels)
        return _to_svg(fig, plot_id)


def passk_figure(plot_id: str, curves: Sequence[Band]) -> str:
    """pass^k per arm: the chance that all k trials of a task succeed."""
    rows = math.ceil(len(curves) / 3)
    height = 3.0 + 0.2 * rows
    with _style(plot_id):
        # Fixed margins (inches: axis labels, then the legend's rows under them), no layout
        # engine: one draw fewer per plot.
        fig = Figure(figsize=(4.6, height))
        fig.subplots_adjust(
            left=0.6 / 4.6, right=0.97, top=1 - 0.15 / height, bottom=(0.6 + 0.2 * rows) / height
        )
        ax = fig.subplots()
        _draw_bands(ax, curves, spread=0.04 if len(curves) > 1 else 0.0)
        ax.set(xlabel="k (trials that must all succeed)", ylabel="pass^k, %")
        ax.set_ylim(-2, 102)
        if curves and curves[0].x:
            ax.set_xticks(list(curves[0].x))
        if curves:
            fig.legend(fontsize=8, loc="lower center", ncols=min(len(curves), 3))
        return _to_svg(fig, plot_id)


@dataclass(frozen=True)
class FloorPanel:
    """One diagnostic of every arm against the reference's noise floor: `values` per arm
    with optional intervals, the floor as a line and/or a shaded band (same units)."""

    title: str
    arms: Sequence[str]
    values: Sequence[float | None]
    low: Sequence[float | None] | None = None
    high: Sequence[float | None] | None = None
    floor: float | None = None
    band: tuple[float, float] | None = None
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
    itself (grey line or band): inside the grey, chance alone could have produced it. Arms
    are rows (named once, on the left), so the figure grows with them and no name is slanted
    over its neighbour."""
    n_arms = max((len(p.arms) for p in panels), default=1)
    with _style(plot_id):
        fig = Figure(figsize=(9.0, ROW_IN * max(n_arms, 3) + 1.1), layout="constrained")
        axes = fig.subplots(1, max(len(panels), 1), squeeze=False, sharey=True)[0]
        for i, (ax, p) in enumerate(zip(axes, [q.clipped() for q in panels], strict=False)):
            ys = list(range(len(p.arms)))
            if p.band is not None:
                ax.axvspan(*p.band, color="#bbbbbb", alpha=0.45, lw=0, label="floor")
            if p.floor is not None:
                ax.axvline(p.floor, color="#555555", lw=1.0, ls="--", label="floor")
            for y, v in zip(ys, p.values, strict=True):
                if v is None or not math.isfinite(v):
                    ax.annotate(
                        "n/a", (0.5, y), xycoords=("axes fraction", "data"), ha="center",
                        va="center", fontsize=7, color="#666666",
                    )  # fmt: skip
            if p.low is not None and p.high is not None:
                for y, lo, hi in zip(ys, p.low, p.high, strict=True):
                    if lo is not None and hi is not None:
                        ax.plot([lo, hi], [y, y], color="#333333", lw=1.4)
            xs = [math.nan if v is None else v for v in p.values]
            ax.plot(xs, ys, "o", color=PALETTE[4], ms=5, ls="none")
            ax.set_yticks(ys, [_short(a, 18) for a in p.arms])
            ax.tick_params(axis="y", labelleft=i == 0)
            ax.set_ylim(len(ys) - 0.5, -0.5)
            finite = [v for v in xs if math.isfinite(v)]
            if p.log and finite and all(v > 0 for v in finite):
                ax.set_xscale("log")
                ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0), numticks=4))
                ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"×{v:g}"))
                ax.xaxis.set_minor_formatter(NullFormatter())
            else:
                ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
            if p.limits is not None:
                pad = 0.04 * (p.limits[1] - p.limits[0])
                left, right = ax.get_xlim()
                ax.set_xlim(max(left, p.limits[0] - pad), min(right, p.limits[1] + pad))
            ax.set_title(p.title, loc="left", fontsize=8)
        if not panels:
            axes[0].annotate("no noise floor", (0.5, 0.5), xycoords="axes fraction", ha="center")
            axes[0].set_axis_off()
        return _to_svg(fig, plot_id)


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
