"""A small SVG writer for the report's figures: shapes and text in points, written as strings.

Why not a plot library: the report's charts are lines, bars, points and intervals on one or
two axes, and a library that lays out text by rendering it (matplotlib) spends most of the
report's time doing so. Here text is measured from DejaVu Sans's advance widths (the font the
page asks for first), so labels can be placed, and a label that would overlap another left
out, without rendering anything.

Safe by construction: every piece of text goes through `escape`, so a model-generated tool
name can label a point without becoming markup; the output has no script, no image and no
external reference, and the same input gives the same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from markupsafe import escape

FONT = "'DejaVu Sans', 'Bitstream Vera Sans', Arial, sans-serif"

_ASCII = "".join(map(chr, range(32, 127)))
_ASCII_EM = (
    "0.318,0.401,0.46,0.838,0.636,0.95,0.78,0.275,0.39,0.39,0.5,0.838,0.318,0.361,0.318,0.337,"
    "0.636,0.636,0.636,0.636,0.636,0.636,0.636,0.636,0.636,0.636,0.337,0.337,0.838,0.838,0.838,"
    "0.531,1.0,0.684,0.686,0.698,0.77,0.632,0.575,0.775,0.752,0.295,0.295,0.656,0.557,0.863,0.748,"
    "0.787,0.603,0.787,0.695,0.635,0.611,0.732,0.684,0.989,0.685,0.611,0.685,0.39,0.337,0.39,"
    "0.838,0.5,0.5,0.613,0.635,0.55,0.635,0.615,0.352,0.635,0.634,0.278,0.278,0.579,0.278,0.974,"
    "0.634,0.612,0.635,0.635,0.411,0.521,0.392,0.634,0.592,0.818,0.592,0.592,0.525,0.636,0.337,"
    "0.636,0.838"
)
ADVANCE_EM: dict[str, float] = dict(zip(_ASCII, map(float, _ASCII_EM.split(",")), strict=True))
"""DejaVu Sans advance widths in em (from the font's hmtx table); others count as `WIDE_EM`."""
WIDE_EM = 0.85
ASCENT_EM, DESCENT_EM = 0.93, 0.24
"""DejaVu Sans's line box above and below the baseline, in em (what a browser's text box spans)."""


def text_width(text: str, size: float) -> float:
    """The width in points of `text` set at `size` points."""
    return size * sum(ADVANCE_EM.get(c, WIDE_EM) for c in text)


def num(x: float) -> str:
    """A coordinate with two decimals at most, no trailing zeros (short, stable bytes)."""
    text = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


@dataclass(frozen=True)
class Box:
    """A rectangle in points (x right, y down)."""

    left: float
    top: float
    right: float
    bottom: float

    def overlaps(self, other: Box) -> bool:
        return min(self.right, other.right) > max(self.left, other.left) and min(
            self.bottom, other.bottom
        ) > max(self.top, other.top)


Anchor = Literal["start", "middle", "end"]
VAlign = Literal["baseline", "center", "top", "bottom"]


def text_box(
    x: float, y: float, text: str, size: float, anchor: Anchor, valign: VAlign, rotate: bool
) -> tuple[float, Box]:
    """(baseline y, box) of a text at (x, y); `rotate`: turned 90° anticlockwise about (x, y),
    where `anchor` then runs along the vertical and `valign` across it."""
    w = text_width(text, size)
    shift = {"baseline": 0.0, "center": 0.35 * size, "top": ASCENT_EM * size}
    baseline = y + shift.get(valign, -DESCENT_EM * size)
    start = {"start": 0.0, "middle": -w / 2, "end": -w}[anchor]
    up, down = baseline - ASCENT_EM * size, baseline + DESCENT_EM * size
    if not rotate:
        return baseline, Box(x + start, up, x + start + w, down)
    # rotated about (x, y): the text runs upwards from y - start; across, x + (line - y)
    return baseline, Box(x + (up - y), y - start - w, x + (down - y), y - start)


class Drawing:
    """One figure: elements appended in drawing order, ids prefixed `plot-<id>-` so several
    figures share a page, and the boxes of the texts written so far (for `text(optional=)`)."""

    def __init__(self, plot_id: str, width: float, height: float, title: str = "") -> None:
        self.plot_id = plot_id
        self.width = width
        self.height = height
        self.title = title
        self.parts: list[str] = []
        self.boxes: list[Box] = []
        self._ids: dict[str, int] = {}

    def new_id(self, kind: str) -> str:
        n = self._ids[kind] = self._ids.get(kind, 0) + 1
        return f"plot-{self.plot_id}-{kind}_{n}"

    def open_group(self, kind: str) -> None:
        self.parts.append(f'<g id="{self.new_id(kind)}">')

    def close_group(self) -> None:
        self.parts.append("</g>")

    def clip(self, x: float, y: float, w: float, h: float) -> str:
        """A clip path for a plotting area; returns its id."""
        cid = self.new_id("clip")
        self.parts.append(
            f'<clipPath id="{cid}"><rect x="{num(x)}" y="{num(y)}" width="{num(w)}" '
            f'height="{num(h)}"/></clipPath>'
        )
        return cid

    def line(
        self,
        points: Sequence[tuple[float, float]],
        colour: str,
        width: float = 1.0,
        dash: Sequence[float] | None = None,
        opacity: float = 1.0,
        clip: str | None = None,
    ) -> None:
        """A polyline (two points: a segment)."""
        if len(points) < 2:
            return
        d = "M" + "L".join(f"{num(x)} {num(y)}" for x, y in points)
        style = f'fill="none" stroke="{colour}" stroke-width="{num(width)}"'
        if dash:
            style += f' stroke-dasharray="{",".join(num(v) for v in dash)}"'
        if opacity < 1:
            style += f' stroke-opacity="{num(opacity)}"'
        self.parts.append(f'<path d="{d}" {style}{_clip(clip)}/>')

    def polygon(
        self,
        points: Sequence[tuple[float, float]],
        colour: str,
        opacity: float = 1.0,
        clip: str | None = None,
        stroke: str | None = None,
    ) -> None:
        d = "M" + "L".join(f"{num(x)} {num(y)}" for x, y in points) + "Z"
        style = f'fill="{colour}"'
        if opacity < 1:
            style += f' fill-opacity="{num(opacity)}"'
        if stroke:
            style += f' stroke="{stroke}" stroke-width="1"'
        self.parts.append(f'<path d="{d}" {style}{_clip(clip)}/>')

    def rect(
        self,
        x: float,
        y: float,
        w: float,
        h: float,
        colour: str,
        opacity: float = 1.0,
        clip: str | None = None,
    ) -> None:
        size = f'width="{num(max(w, 0.0))}" height="{num(max(h, 0.0))}"'
        self._shape(
            "rect",
            f'x="{num(x)}" y="{num(y)}" {size} fill="{colour}"',
            "fill-opacity",
            opacity,
            clip,
        )

    def circle(
        self,
        x: float,
        y: float,
        r: float,
        colour: str,
        fill: str | None = None,
        opacity: float = 1.0,
        clip: str | None = None,
    ) -> None:
        at = f'cx="{num(x)}" cy="{num(y)}" r="{num(r)}"'
        self._shape(
            "circle", f'{at} fill="{fill or colour}" stroke="{colour}"', "opacity", opacity, clip
        )

    def _shape(
        self, tag: str, attributes: str, fade: str, opacity: float, clip: str | None
    ) -> None:
        """One element; below full opacity, `fade` names the attribute that says so."""
        faded = f' {fade}="{num(opacity)}"' if opacity < 1 else ""
        self.parts.append(f"<{tag} {attributes}{faded}{_clip(clip)}/>")

    def text(
        self,
        x: float,
        y: float,
        text: str,
        size: float = 9.0,
        anchor: Anchor = "start",
        valign: VAlign = "baseline",
        colour: str = "#000000",
        rotate: bool = False,
        optional: bool = False,
    ) -> bool:
        """Write `text` at (x, y); an `optional` text that would overlap a text already
        written is left out (a label that cannot be read is better missing than printed over
        another). Returns whether it was written."""
        baseline, box = text_box(x, y, text, size, anchor, valign, rotate)
        if optional and any(box.overlaps(b) for b in self.boxes):
            return False
        self.boxes.append(box)
        turn = f' transform="rotate(-90 {num(x)} {num(y)})"' if rotate else ""
        # rotated, the text is written level at its baseline, then turned about (x, y)
        self.parts.append(
            f'<text x="{num(x)}" y="{num(baseline)}" font-size="{num(size)}" '
            f'text-anchor="{anchor}" fill="{colour}"{turn}>{escape(text)}</text>'
        )
        return True

    def render(self) -> str:
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{num(self.width)}pt" '
            f'height="{num(self.height)}pt" viewBox="0 0 {num(self.width)} {num(self.height)}" '
            f'version="1.1" id="plot-{escape(self.plot_id)}" role="img" '
            f'font-family="{FONT}" stroke-linecap="butt" stroke-linejoin="round">'
        )
        title = f"<title>{escape(self.title)}</title>" if self.title else ""
        return head + title + "".join(self.parts) + "</svg>"


def _clip(clip: str | None) -> str:
    return f' clip-path="url(#{clip})"' if clip else ""
