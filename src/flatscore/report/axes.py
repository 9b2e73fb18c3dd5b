"""One plotting area of a figure: its scales, ticks, grid, spines and labels, and the marks
drawn in data coordinates (lines, bands, points, bars, intervals), in the report's style
(left and bottom spines, a light grid, titles on the left), on an `svg.Drawing`."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from flatscore.report.svg import Anchor, Drawing, VAlign, finite, text_width

FONT_SIZE = 9.0
TITLE_SIZE = 10.8
TICK = 3.5
"""Tick length and the gap between a tick and its label, in points."""
GRID = "#b0b0b0"
GRID_OPACITY = 0.3

PALETTE = ("#000000", "#E69F00", "#56B4E9", "#009E73", "#D55E00", "#CC79A7", "#0072B2", "#F0E442")
"""Colour-blind-safe palette (Okabe-Ito); the reference arm always takes the first colour."""


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


@dataclass(frozen=True)
class Scale:
    """Data [lo, hi] onto points [start, end] (end < start for a y axis: up is smaller)."""

    lo: float
    hi: float
    start: float
    end: float
    log: bool = False

    def _t(self, v: float) -> float:
        return math.log10(v) if self.log else v

    def __call__(self, v: float) -> float:
        a, b = self._t(self.lo), self._t(self.hi)
        return self.start + (self._t(v) - a) / ((b - a) or 1.0) * (self.end - self.start)

    def inside(self, v: float) -> bool:
        return min(self.lo, self.hi) - 1e-9 <= v <= max(self.lo, self.hi) + 1e-9


def padded(values: Sequence[float], log: bool = False, margin: float = 0.05) -> tuple[float, float]:
    """Data limits with a 5% margin each side (on a log axis, in decades)."""
    xs = [v for v in values if math.isfinite(v) and (v > 0 or not log)]
    if not xs:
        return (0.1, 10.0) if log else (0.0, 1.0)
    lo, hi = min(xs), max(xs)
    if log:
        a, b = math.log10(lo), math.log10(hi)
        if a == b:
            a, b = a - 0.5, b + 0.5
        pad = margin * (b - a)
        return 10 ** (a - pad), 10 ** (b + pad)
    if lo == hi:
        lo, hi = lo - (abs(lo) * 0.05 or 0.05), hi + (abs(hi) * 0.05 or 0.05)
    pad = margin * (hi - lo)
    return lo - pad, hi + pad


def nice_ticks(lo: float, hi: float, most: int, integer: bool = False) -> list[float]:
    """At most `most` + 1 round ticks inside [lo, hi] (steps 1, 2, 2.5, 5 × 10^k)."""
    span = hi - lo
    if span <= 0:
        return [lo]
    raw = span / max(most, 1)
    power = 10 ** math.floor(math.log10(raw))
    steps = (1.0, 2.0, 5.0, 10.0) if integer else (1.0, 2.0, 2.5, 5.0, 10.0)
    step = next(s * power for s in steps if s * power >= raw * (1 - 1e-9))
    if integer:
        step = max(step, 1.0)
    first = math.ceil(lo / step - 1e-9)
    ticks = [round((first + i) * step, 10) for i in range(int((hi - lo) / step + 1e-9) + 2)]
    inside = [0.0 if t == 0 else t for t in ticks if lo - 1e-9 <= t <= hi + 1e-9]
    if not inside and most < 50:  # a step wider than the span missed it: a finer one
        return nice_ticks(lo, hi, most + 1, integer)
    return inside


def decade_ticks(
    lo: float, hi: float, subs: Sequence[float] = (1.0,), most: int = 0
) -> list[float]:
    """Log ticks: each decade times each of `subs`, inside [lo, hi]; with `most`, every
    second (third, ...) decade only, so that at most about `most` remain."""
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    ticks = [
        [10.0**d * s for s in subs if lo * (1 - 1e-9) <= 10.0**d * s <= hi * (1 + 1e-9)]
        for d in range(a, b + 1)
    ]
    decades = [t for t in ticks if t]
    every = max(1, math.ceil(len(decades) / most)) if most else 1
    return [v for t in decades[::every] for v in t]


def times(v: float) -> str:
    """A ratio tick: ×0.1, ×1, ×10."""
    return f"×{v:g}"


def plain(v: float) -> str:
    return f"{v:g}".replace("-", "−")


@dataclass(frozen=True)
class Style:
    """One series' look: colour, dash pattern (in line widths), marker and its size."""

    colour: str
    marker: str = "o"
    size: float = 5.0
    hollow: bool = False
    dash: tuple[float, ...] = ()
    width: float = 1.6


MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
DASHES: tuple[tuple[float, ...], ...] = (
    (),
    (3.7, 1.6),
    (1.0, 1.65),
    (6.4, 1.6, 1.0, 1.6),
    (5, 1, 1, 1),
    (1, 2),
    (6, 2),
    (2, 1),
)
"""Per series: lines that coincide (an arm identical to the reference) stay visible — the
later one is dashed over the earlier and each has its own marker."""


def series_style(i: int) -> Style:
    """The i-th series of a line chart (0: the reference: solid, filled circles)."""
    j = i % len(MARKERS)
    return Style(colour(i), MARKERS[j], 4.0 if j else 5.0, hollow=j > 0, dash=DASHES[j])


def marker(
    d: Drawing,
    kind: str,
    x: float,
    y: float,
    size: float,
    col: str,
    hollow: bool,
    clip: str | None = None,
    opacity: float = 1.0,
) -> None:
    """A marker of diameter `size` points centred at (x, y)."""
    r = size / 2
    fill = "none" if hollow else col
    if kind == "o":
        d.circle(x, y, r, col, fill, opacity, clip)
        return
    shapes: dict[str, list[tuple[float, float]]] = {
        "s": [(-1, -1), (1, -1), (1, 1), (-1, 1)],
        "^": [(0, -1), (1, 1), (-1, 1)],
        "v": [(0, 1), (1, -1), (-1, -1)],
        ">": [(1, 0), (-1, 1), (-1, -1)],
        "D": [(0, -1.2), (1.2, 0), (0, 1.2), (-1.2, 0)],
        "P": _cross(0.35),
        "X": [(-y, x) for x, y in _rotate(_cross(0.3))],
        "*": _star(),
    }
    pts = [(x + r * px, y + r * py) for px, py in shapes.get(kind, shapes["s"])]
    d.polygon(pts, "none" if hollow else col, opacity, clip, stroke=col)


def _cross(t: float) -> list[tuple[float, float]]:
    return [
        (-t, -1),
        (t, -1),
        (t, -t),
        (1, -t),
        (1, t),
        (t, t),
        (t, 1),
        (-t, 1),
        (-t, t),
        (-1, t),
        (-1, -t),
        (-t, -t),
    ]


def _rotate(pts: list[tuple[float, float]]) -> list[tuple[float, float]]:
    c = math.sqrt(0.5)
    return [(c * (x - y), c * (x + y)) for x, y in pts]


def _star() -> list[tuple[float, float]]:
    return [
        (
            math.sin(k * math.pi / 5) * (1 if k % 2 == 0 else 0.4),
            -math.cos(k * math.pi / 5) * (1 if k % 2 == 0 else 0.4),
        )
        for k in range(10)
    ]


@dataclass
class Panel:
    """A plotting area at (left, top) of size (width, height) points with its scales."""

    d: Drawing
    left: float
    top: float
    width: float
    height: float
    x: Scale = field(init=False)
    y: Scale = field(init=False)
    clip_id: str = field(init=False)

    def __post_init__(self) -> None:
        self.clip_id = self.d.clip(self.left, self.top, self.width, self.height)
        self.set_x(0.0, 1.0)
        self.set_y(0.0, 1.0)

    @property
    def right(self) -> float:
        return self.left + self.width

    @property
    def bottom(self) -> float:
        return self.top + self.height

    def set_x(self, lo: float, hi: float, log: bool = False) -> None:
        self.x = Scale(lo, hi, self.left, self.right, log)

    def set_y(self, lo: float, hi: float, log: bool = False) -> None:
        """y limits; with lo > hi the axis runs downwards (rows: the first at the top)."""
        self.y = Scale(lo, hi, self.bottom, self.top, log)

    # -- marks in data coordinates ---------------------------------------------------------
    def polyline(
        self, xs: Sequence[float], ys: Sequence[float | None], style: Style, markers: bool = True
    ) -> None:
        """A line broken where y is missing, with a marker at each point."""
        run: list[tuple[float, float]] = []
        dash = [v * style.width for v in style.dash]
        for x, y in [*zip(xs, ys, strict=True), (math.nan, None)]:
            if finite(x) and finite(y):
                assert y is not None
                run.append((self.x(x), self.y(y)))
                continue
            self.d.line(run, style.colour, style.width, dash, clip=self.clip_id)
            run = []
        if markers:
            for x, y in zip(xs, ys, strict=True):
                if finite(x) and finite(y) and y is not None:
                    self.point(x, y, style)

    def point(self, x: float, y: float, style: Style, opacity: float = 1.0) -> None:
        if self.x.inside(x) and self.y.inside(y):
            marker(
                self.d,
                style.marker,
                self.x(x),
                self.y(y),
                style.size,
                style.colour,
                style.hollow,
                opacity=opacity,
            )

    def band(
        self,
        xs: Sequence[float],
        low: Sequence[float | None],
        high: Sequence[float | None],
        col: str,
        opacity: float = 0.15,
    ) -> None:
        """The area between two curves, broken where either is missing."""
        run: list[tuple[float, float, float]] = []
        for x, lo, hi in [*zip(xs, low, high, strict=True), (math.nan, None, None)]:
            if finite(x) and finite(lo) and finite(hi):
                assert lo is not None and hi is not None
                run.append((x, lo, hi))
                continue
            if len(run) > 1:
                top = [(self.x(a), self.y(h)) for a, _, h in run]
                bottom = [(self.x(a), self.y(lo_)) for a, lo_, _ in reversed(run)]
                self.d.polygon(top + bottom, col, opacity, self.clip_id)
            run = []

    def segment(
        self,
        x0: float,
        y0: float,
        x1: float,
        y1: float,
        col: str,
        width: float = 1.4,
        dash: Sequence[float] = (),
    ) -> None:
        self.d.line(
            [(self.x(x0), self.y(y0)), (self.x(x1), self.y(y1))],
            col,
            width,
            list(dash),
            clip=self.clip_id,
        )

    def vline(self, x: float, col: str, width: float = 0.8, dash: Sequence[float] = ()) -> None:
        if self.x.inside(x):
            self.d.line([(self.x(x), self.top), (self.x(x), self.bottom)], col, width, list(dash))

    def hline(self, y: float, col: str, width: float = 0.8) -> None:
        if self.y.inside(y):
            self.d.line([(self.left, self.y(y)), (self.right, self.y(y))], col, width)

    def xspan(self, lo: float, hi: float, col: str, opacity: float) -> None:
        a, b = sorted((self.x(lo), self.x(hi)))
        self.d.rect(a, self.top, b - a, self.height, col, opacity, self.clip_id)

    def hbar(self, y: float, thickness: float, value: float, col: str) -> None:
        """A horizontal bar from 0 to `value`, centred on row y, `thickness` rows thick."""
        a, b = sorted((self.x(0.0), self.x(value)))
        c, e = sorted((self.y(y - thickness / 2), self.y(y + thickness / 2)))
        self.d.rect(a, c, b - a, e - c, col, clip=self.clip_id)

    def vbar(self, x: float, thickness: float, value: float, col: str) -> None:
        a, b = sorted((self.x(x - thickness / 2), self.x(x + thickness / 2)))
        c, e = sorted((self.y(0.0), self.y(value)))
        self.d.rect(a, c, b - a, e - c, col, clip=self.clip_id)

    def label(
        self,
        x: float,
        y: float,
        text: str,
        size: float = 7.0,
        dx: float = 0.0,
        dy: float = 0.0,
        anchor: Anchor = "start",
        valign: VAlign = "baseline",
        col: str = "#000000",
        optional: bool = False,
    ) -> bool:
        """Text at a data point, offset by (dx, dy) points (dy up)."""
        return self.d.text(
            self.x(x) + dx, self.y(y) - dy, text, size, anchor, valign, col, optional=optional
        )

    def note(
        self,
        fx: float,
        y: float,
        text: str,
        size: float = 7.0,
        anchor: Anchor = "start",
        col: str = "#666666",
    ) -> None:
        """Text at a fraction `fx` of the panel's width, on row y (data), centred on it."""
        self.d.text(self.left + fx * self.width, self.y(y), text, size, anchor, "center", col)

    # -- the frame ---------------------------------------------------------------------------
    def frame(
        self,
        xticks: Sequence[float] = (),
        yticks: Sequence[float] = (),
        xfmt: Callable[[float], str] = plain,
        yfmt: Callable[[float], str] = plain,
        ylabels: Sequence[str] | None = None,
        show_ylabels: bool = True,
        xtick_size: float = FONT_SIZE,
        xtick_rotate: bool = False,
        grid: bool = True,
    ) -> None:
        """Grid, the left and bottom spines, ticks and their labels (`ylabels`: names
        instead of numbers for the y ticks, as rows)."""
        d = self.d
        xs = [v for v in xticks if self.x.inside(v)]
        ys = [v for v in yticks if self.y.inside(v)]
        if grid:
            for v in xs:
                d.line(
                    [(self.x(v), self.top), (self.x(v), self.bottom)],
                    GRID,
                    0.8,
                    opacity=GRID_OPACITY,
                )
            for v in ys:
                d.line(
                    [(self.left, self.y(v)), (self.right, self.y(v))],
                    GRID,
                    0.8,
                    opacity=GRID_OPACITY,
                )
        d.line([(self.left, self.top), (self.left, self.bottom)], "#000000", 0.8)
        d.line([(self.left, self.bottom), (self.right, self.bottom)], "#000000", 0.8)
        for v in xs:
            x = self.x(v)
            d.line([(x, self.bottom), (x, self.bottom + TICK)], "#000000", 0.8)
            if xtick_rotate:  # 30°-slanted labels read as steep: set upright, turned 90°
                d.text(x, self.bottom + 2 * TICK, xfmt(v), xtick_size, "end", "center", rotate=True)
            else:
                d.text(x, self.bottom + 2 * TICK, xfmt(v), xtick_size, "middle", "top")
        names = list(ylabels) if ylabels is not None else [yfmt(v) for v in ys]
        for v, name in zip(ys, names, strict=False):
            y = self.y(v)
            d.line([(self.left - TICK, y), (self.left, y)], "#000000", 0.8)
            if show_ylabels:
                d.text(self.left - 2 * TICK, y, name, FONT_SIZE, "end", "center")

    def xlabel(self, text: str, below: float = 2 * TICK + FONT_SIZE * 1.2 + 4) -> None:
        self.d.text(
            self.left + self.width / 2, self.bottom + below, text, FONT_SIZE, "middle", "top"
        )

    def ylabel(self, text: str, gap: float) -> None:
        """The y label, turned, `gap` points left of the spine."""
        self.d.text(
            self.left - gap,
            self.top + self.height / 2,
            text,
            FONT_SIZE,
            "middle",
            "bottom",
            rotate=True,
        )

    def empty(self, text: str) -> None:
        """A message in the middle of a panel that has nothing to draw."""
        self.d.text(
            self.left + self.width / 2,
            self.top + self.height / 2,
            text,
            FONT_SIZE,
            "middle",
            "center",
        )

    def title(self, text: str, size: float = TITLE_SIZE) -> None:
        self.d.text(self.left, self.top - 6, text, size, "start", "bottom")


def tick_width(labels: Sequence[str], size: float = FONT_SIZE) -> float:
    """Room for y tick labels: the widest, the tick and the gap."""
    return max((text_width(s, size) for s in labels), default=0.0) + 2 * TICK


@dataclass(frozen=True)
class LegendEntry:
    label: str
    style: Style
    line: bool = True
    """A line sample with the marker (lines) or the marker alone (points, patches)."""


def legend(
    d: Drawing,
    entries: Sequence[LegendEntry],
    centre_x: float,
    top: float,
    columns: int,
    size: float = 8.0,
    right: float | None = None,
) -> float:
    """Entries in up to `columns` columns, filled column by column, centred on `centre_x`
    (or ending at `right`), from `top`; returns the height used."""
    if not entries:
        return 0.0
    rows = math.ceil(len(entries) / max(1, min(columns, len(entries))))
    cols = math.ceil(len(entries) / rows)
    sample = 2.0 * size
    gap = 0.8 * size
    widths = [
        max(text_width(e.label, size) for e in entries[c * rows : (c + 1) * rows])
        + sample
        + 0.8 * size
        for c in range(cols)
    ]
    total = sum(widths) + gap * (cols - 1)
    x0 = (right - total) if right is not None else centre_x - total / 2
    row_h = 1.4 * size
    for i, e in enumerate(entries):
        c, r = divmod(i, rows)
        x = x0 + sum(widths[:c]) + gap * c
        y = top + r * row_h + row_h / 2
        if e.line:
            dash = [v * e.style.width for v in e.style.dash]
            d.line([(x, y), (x + sample, y)], e.style.colour, e.style.width, dash)
        if e.style.marker:
            marker(
                d, e.style.marker, x + sample / 2, y, e.style.size, e.style.colour, e.style.hollow
            )
        d.text(x + sample + 0.4 * size, y, e.label, size, "start", "center")
    return rows * row_h


def y_ticks(lo: float, hi: float, height: float, integer: bool = False) -> list[float]:
    """Round ticks for a y axis `height` points tall: at most one per two lines of text."""
    return nice_ticks(lo, hi, max(2, min(9, int(height / (2 * FONT_SIZE)))), integer)


def fitting_ticks(
    lo: float,
    hi: float,
    length: float,
    fmt: Callable[[float], str] = plain,
    most: int = 9,
    integer: bool = False,
    size: float = FONT_SIZE,
) -> list[float]:
    """Round ticks in [lo, hi] whose labels, `length` points apart in all, never touch."""
    for n in range(most, 0, -1):
        ticks = nice_ticks(lo, hi, n, integer)
        if len(ticks) < 2:
            return ticks
        room = length * (ticks[1] - ticks[0]) / (hi - lo)
        if all(text_width(fmt(t), size) + 0.8 * size <= room for t in ticks):
            return ticks
    return nice_ticks(lo, hi, 1, integer)
