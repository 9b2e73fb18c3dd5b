"""The SVG writer: text measured from the font's widths, escaped, left out when it would
overlap; coordinates short and stable."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from flatscore.report.svg import ASCENT_EM, DESCENT_EM, Drawing, num, text_box, text_width

NS = "{http://www.w3.org/2000/svg}"


def test_text_width_known_answers() -> None:
    assert text_width("ab", 10.0) == pytest.approx(10 * (0.613 + 0.635))
    assert text_width("", 9.0) == 0.0
    assert text_width("ρ", 10.0) == pytest.approx(8.5)  # outside ASCII: a wide estimate


def test_numbers_are_short() -> None:
    assert [num(x) for x in (1.0, 1.234, -0.001, 12.5, 0.0)] == ["1", "1.23", "0", "12.5", "0"]


def test_text_boxes_level_and_turned() -> None:
    baseline, box = text_box(10, 20, "ab", 10, "end", "center", rotate=False)
    w = text_width("ab", 10)
    assert baseline == pytest.approx(23.5)
    assert (box.left, box.right) == pytest.approx((10 - w, 10))
    assert (box.top, box.bottom) == pytest.approx((23.5 - 10 * ASCENT_EM, 23.5 + 10 * DESCENT_EM))
    # turned 90° about (10, 20), ending there: it runs upwards from 20 + w ... to 20
    _, turned = text_box(10, 20, "ab", 10, "start", "bottom", rotate=True)
    assert (turned.top, turned.bottom) == pytest.approx((20 - w, 20))
    assert turned.right == pytest.approx(10)


def test_labels_are_escaped_and_the_figure_is_well_formed() -> None:
    d = Drawing("t<1>", 100, 50, title='a "title" <b>')
    d.text(5, 20, '<img src=x onerror="alert(1)">&')
    svg = d.render()
    root = ET.fromstring(svg)
    assert root.get("id") == "plot-t<1>"
    assert root.find(f"{NS}title").text == 'a "title" <b>'  # type: ignore[union-attr]
    texts = [t.text for t in root.iter(f"{NS}text")]
    assert texts == ['<img src=x onerror="alert(1)">&']
    assert "<img" not in svg and not any(el.tag.endswith("img") for el in root.iter())


def test_an_optional_label_over_another_text_is_left_out() -> None:
    d = Drawing("o", 200, 100)
    assert d.text(10, 50, "fixed label", 9)
    assert not d.text(12, 51, "over it", 9, optional=True)
    assert d.text(10, 80, "below it", 9, optional=True)
    assert [t.text for t in ET.fromstring(d.render()).iter(f"{NS}text")] == [
        "fixed label",
        "below it",
    ]


def test_ids_are_numbered_per_kind_under_the_plot() -> None:
    d = Drawing("p", 10, 10)
    assert [d.new_id("axes"), d.new_id("axes"), d.new_id("clip")] == [
        "plot-p-axes_1",
        "plot-p-axes_2",
        "plot-p-clip_1",
    ]
