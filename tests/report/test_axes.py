"""Scales, ticks and marks of one plotting area, on tiny inputs with known answers."""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flatscore.report.axes import (
    Panel,
    Scale,
    Style,
    decade_ticks,
    fitting_ticks,
    nice_ticks,
    padded,
)
from flatscore.report.svg import Drawing

NS = "{http://www.w3.org/2000/svg}"


def test_scales_map_data_onto_points() -> None:
    x = Scale(0, 10, 100, 300)
    assert (x(0), x(5), x(10)) == (100, 200, 300)
    y = Scale(-2, 102, 250, 50)  # up is smaller
    assert y(-2) == 250 and y(102) == 50 and y(50) == pytest.approx(150)
    log = Scale(0.1, 10, 0, 200, log=True)
    assert log(1.0) == pytest.approx(100) and log(10) == pytest.approx(200)


def test_ticks_known_answers() -> None:
    assert nice_ticks(-2, 102, 6) == [0, 20, 40, 60, 80, 100]
    assert nice_ticks(-0.45, 9.45, 9, integer=True) == [0, 2, 4, 6, 8]
    assert nice_ticks(-13.3, 51.1, 9) == [-10, 0, 10, 20, 30, 40, 50]
    assert nice_ticks(0, 1, 4) == [0, 0.25, 0.5, 0.75, 1.0]
    assert decade_ticks(0.05, 20) == [0.1, 1.0, 10.0]
    assert decade_ticks(0.8, 2.3, (1.0, 2.0, 5.0)) == [1.0, 2.0]
    assert decade_ticks(0.001, 1000, most=3) == [0.001, 1.0, 1000.0]
    assert padded([0, 10]) == pytest.approx((-0.5, 10.5))
    assert padded([1, 100], log=True) == pytest.approx((10**-0.1, 10**2.1))


def test_tick_labels_never_touch() -> None:
    """40 points for 0-1000: a label ('1000') is ~25 points wide, so only ends remain."""
    assert fitting_ticks(0, 1000, 40) == [0, 1000]
    assert fitting_ticks(0, 1000, 400) == [0, 200, 400, 600, 800, 1000]


@given(st.floats(-1e6, 1e6), st.floats(1e-3, 1e6), st.integers(1, 9))
def test_ticks_lie_inside_and_are_evenly_spaced(lo: float, span: float, most: int) -> None:
    ticks = nice_ticks(lo, lo + span, most)
    assert 1 <= len(ticks) <= most + 2
    assert all(lo - 1e-6 * span <= t <= lo + span + 1e-6 * span for t in ticks)
    steps = {round(b - a, 6) for a, b in itertools.pairwise(ticks)}
    assert len(steps) <= 1 or max(steps) - min(steps) <= 1e-6 * span


def _rects(svg: str) -> list[dict[str, str]]:
    return [r.attrib for r in ET.fromstring(svg).iter(f"{NS}rect")]


def test_bars_have_their_heights_and_positions() -> None:
    """A panel 100 × 50 points at (10, 20); x 0-10, two rows (the first on top)."""
    d = Drawing("b", 200, 100)
    p = Panel(d, 10, 20, 100, 50)
    p.set_x(0, 10)
    p.set_y(1.5, -0.5)
    p.hbar(0, 0.8, 5.0, "#E69F00")
    p.hbar(1, 0.4, 10.0, "#56B4E9")
    p.set_y(0, 10)
    p.vbar(5, 2, 4, "#009E73")
    bars = [r for r in _rects(d.render()) if r.get("fill")]
    assert [(r["x"], r["y"], r["width"], r["height"]) for r in bars] == [
        ("10", "22.5", "50", "20"),  # row 0 centred 0.5 row (12.5 points) down, 0.8 row high
        ("10", "52.5", "100", "10"),
        ("50", "50", "20", "20"),  # x 4 … 6 of 10, height 4 of 10 from the bottom
    ]


def test_a_broken_line_and_its_markers() -> None:
    """A missing value breaks the line (two paths) and has no marker."""
    d = Drawing("l", 100, 100)
    p = Panel(d, 0, 0, 100, 100)
    p.set_x(0, 4)
    p.set_y(0, 1)
    p.polyline([0, 1, 2, 3, 4], [0.0, 0.5, None, 0.5, 1.0], Style("#000000", "o", 5.0))
    root = ET.fromstring(d.render())
    lines = [e for e in root.iter(f"{NS}path") if e.get("clip-path")]
    assert [e.get("d") for e in lines] == ["M0 100L25 50", "M75 50L100 0"]
    assert len(list(root.iter(f"{NS}circle"))) == 4


def test_points_outside_the_limits_are_not_drawn() -> None:
    d = Drawing("o", 100, 100)
    p = Panel(d, 0, 0, 100, 100)
    p.point(2.0, 0.5, Style("#000000"))
    p.point(0.5, 0.5, Style("#000000"))
    assert len(list(ET.fromstring(d.render()).iter(f"{NS}circle"))) == 1
