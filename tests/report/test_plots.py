"""The SVG figures: valid inline SVG, byte-stable, unique ids, labels escaped, ranks right,
axes and bars where the numbers put them."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import rankdata

from flatscore.report import plots
from flatscore.report.svg import text_width

BANDS = [
    plots.Band("bf16", [0, 1, 2], [0.5, 0.7, 0.8], [0.4, 0.6, 0.7], [0.6, 0.8, 0.9]),
    plots.Band("int4", [0, 1, 2], [0.2, 0.6, 0.78]),
]
GAPS = [plots.Band("int4", [0, 1, 2], [0.3, 0.1, 0.02], [0.2, 0.0, -0.05], [0.4, 0.2, 0.1])]


def _all_figures(plot_id: str) -> list[str]:
    return [
        plots.budget_figure(f"b{plot_id}", BANDS, GAPS, 2, 0),
        plots.channel_figure(
            f"c{plot_id}",
            plots.GroupedBars(
                ["role_confusion", "other"], {"bf16": [0.1, 0.0], "int4": [0.3, 0.01]}
            ),
            {
                "int4": [
                    plots.Interval("role_confusion", 3.0, 2.0, None),
                    plots.Interval("other", None),
                ]
            },
        ),
        plots.rank_figure(
            f"r{plot_id}", {"a": 3, "b": 1}, {"a": 9, "c": 2}, "bf16", "int4", 0.5, 0.18
        ),
        plots.passk_figure(f"p{plot_id}", BANDS),
        plots.floor_figure(
            f"f{plot_id}",
            [
                plots.FloorPanel("ρ", ["int4"], [-0.5], [-0.7], [-0.2], floor=-0.3),
                plots.FloorPanel("failed ×", ["int4"], [2.0], band=(0.9, 1.1), log=True),
                plots.FloorPanel("Gap", ["int4"], [None], band=(-1.0, 1.0)),
                plots.FloorPanel("none ×", ["int4"], [None], log=True),  # nothing to log-scale
            ],
        ),
    ]


def test_figures_are_inline_svg_and_byte_stable() -> None:
    first, second = _all_figures("x"), _all_figures("x")
    assert first == second
    for svg in first:
        assert svg.startswith("<svg") and svg.endswith("</svg>")
        assert "<?xml" not in svg and "<!DOCTYPE" not in svg and "<metadata" not in svg
        assert "<script" not in svg and "<image" not in svg
        ET.fromstring(svg)  # well-formed XML


def test_ids_are_prefixed_per_plot_so_a_page_never_repeats_one() -> None:
    ids = [
        i
        for svg in _all_figures("1") + _all_figures("2")
        for i in re.findall(r'\sid="([^"]+)"', svg)
    ]
    assert len(ids) == len(set(ids))
    for svg in _all_figures("3"):
        refs = re.findall(r"url\(#([^)]+)\)", svg)
        own = set(re.findall(r'\sid="([^"]+)"', svg))
        assert set(refs) <= own  # every clip-path reference still resolves


def test_labels_are_escaped_text_not_markup() -> None:
    name = '<img src=x onerror="alert(1)">$x^2$'
    svg = plots.rank_figure("h", {name: 2}, {name: 5}, "ref", "arm", 1.0, 0.0, label_top=1)
    root = ET.fromstring(svg)
    assert not any(el.tag.endswith("img") for el in root.iter())
    texts = "".join(t.text or "" for t in root.iter() if t.tag.endswith("text"))
    assert "<img src=x" in texts  # shown literally (truncated), and no math parsing of $…$


def test_a_label_at_the_right_edge_is_written_leftwards_inside_the_figure() -> None:
    """The name the reference made least (its point on the right edge) gets its label on the
    point's left: written rightwards it would run past the figure and be cut off."""
    ref = {f"name_{i}": 10 - i for i in range(5)} | {"find_customer_by_phone_number": 1}
    arm = {**ref, "find_customer_by_phone_number": 30}
    svg = plots.rank_figure("edge", ref, arm, "ref", "arm", 0.9, 0.0)
    root = ET.fromstring(svg)
    width = float(root.attrib["viewBox"].split()[2])
    labels = [t for t in root.iter() if t.tag.endswith("text") and t.get("font-size") == "7"]
    edge = next(t for t in labels if (t.text or "").startswith("find_customer"))
    assert edge.get("text-anchor") == "end" and float(edge.attrib["x"]) < width
    for t in labels:  # every label's right end inside the figure
        right = float(t.attrib["x"])
        if t.get("text-anchor") == "start":
            right += text_width(t.text or "", 7.0)
        assert right <= width, t.text


@given(st.dictionaries(st.sampled_from("abcdefgh"), st.integers(0, 5), min_size=1))
def test_ranks_match_scipy_average_ranks_of_descending_counts(counts: dict[str, int]) -> None:
    names = sorted(counts)
    expected = rankdata([-counts[n] for n in names], method="average")
    ranks = plots._ranks(counts)
    assert [ranks[n] for n in names] == list(expected)


def test_a_ratio_that_cannot_be_drawn_says_why() -> None:
    """A channel with no ratio (none in the reference) gets its reason, not a bare 'n/a'."""
    svg = plots.channel_figure(
        "n",
        plots.GroupedBars(["unknown_tool", "other"], {"ref": [0.0, 0.0], "int4": [0.05, 0.0]}),
        {
            "int4": [
                plots.Interval("unknown_tool", None, note="new: 0 → 5.0%"),
                plots.Interval("other", None),
            ]
        },
    )
    assert "new: 0 → 5.0%" in svg and "no ratio" in svg and "n/a" not in svg


NS = "{http://www.w3.org/2000/svg}"


def _line_styles(svg: str) -> list[tuple[str, str]]:
    """(dash pattern, marker shape) of each data line in an SVG: its path (clipped to the
    axes: grid, spines and legend samples are not) and the shape of the marker drawn after
    it (a circle, or a polygon's vertex count)."""
    root = ET.fromstring(svg)
    out = []
    elements = list(root.iter())
    for i, el in enumerate(elements):
        if el.tag == f"{NS}path" and el.get("clip-path") and el.get("fill") == "none":
            mark = elements[i + 1]
            shape = "circle" if mark.tag == f"{NS}circle" else str(mark.get("d", "").count("L"))
            out.append((el.get("stroke-dasharray", "solid"), shape))
    return out


def test_coinciding_lines_stay_visible() -> None:
    """An arm identical to the reference (the demo's int8 on retail) must not hide it: each
    line has its own dash pattern and marker shape."""
    same = [plots.Band(name, [0, 1, 2], [0.5, 0.6, 0.6]) for name in ("ref", "int8", "int4")]
    styles = _line_styles(plots.budget_figure("same", same, [], 2, 0))
    assert len(styles) == 3
    assert len({d for d, _ in styles}) == 3 and len({m for _, m in styles}) == 3, styles


def _texts(svg: str) -> list[str]:
    return [t.text or "" for t in ET.fromstring(svg).iter(f"{NS}text")]


def test_budget_figure_axes_known_answers() -> None:
    """S(K) runs 0-100% whatever the data; Gap(K)'s axis spans its bands and 0; each panel is
    an `axes` group; the K marks are named."""
    svg = plots.budget_figure("k", BANDS, GAPS, 2, 0)
    texts = _texts(svg)
    for tick in ("0", "20", "40", "60", "80", "100"):
        assert tick in texts
    assert "−10" not in texts and "40" in texts  # gaps: −5 … 40 points, padded
    assert "default K=2" in texts and "small K=0" in texts
    assert len(re.findall(r'<g id="plot-k-axes_\d+"', svg)) == 2
    assert texts.count("bf16") == 1 and texts.count("int4") == 1  # one legend for both


def test_channel_bars_are_as_long_as_their_rates() -> None:
    """Rates 0.1 and 0.3 of one channel: the second bar three times the first's length."""
    svg = plots.channel_figure(
        "w", plots.GroupedBars(["role_confusion"], {"bf16": [0.1], "int4": [0.3]}), {}
    )
    bars = [
        float(r.get("width", "0"))
        for r in ET.fromstring(svg).iter(f"{NS}rect")
        if r.get("fill") in (plots.PALETTE[0], plots.PALETTE[1]) and r.get("clip-path")
    ]
    assert len(bars) == 2 and bars[1] == pytest.approx(3 * bars[0], rel=0.01)


def test_floor_panel_keeps_rho_inside_its_range() -> None:
    """ρ's floor plus the excess interval can reach past −1 (floor −0.3, excess down to
    −0.9): the panel draws it at −1, never below (issue 26: the ρ panel drew past −1)."""
    panel = plots.FloorPanel("ρ", ["int4", "int8"], [-0.95, 0.4], [-1.2, None], [0.1, 1.3])
    bounded = plots.FloorPanel(**{**panel.__dict__, "limits": (-1.0, 1.0)}).clipped()
    assert bounded.values == [-0.95, 0.4]
    assert bounded.low == [-1.0, None] and bounded.high == [0.1, 1.0]
    assert panel.clipped() is panel  # no limits, nothing clipped
    svg = plots.floor_figure("rho", [bounded])
    ET.fromstring(svg)


def test_floor_panel_shades_the_floor_and_its_reach() -> None:
    """A signed floor ±2 with its reach ±4 (floor + 2 standard errors): two grey spans, the
    reach lighter and twice as wide."""
    panel = plots.FloorPanel("Gap", ["int4"], [1.0], band=(-2.0, 2.0), reach=(-4.0, 4.0))
    svg = plots.floor_figure("reach", [panel])
    grey = {
        float(r.get("fill-opacity", "1")): float(r.get("width", "0"))
        for r in ET.fromstring(svg).iter(f"{NS}rect")
        if r.get("fill") == "#bbbbbb"
    }
    assert set(grey) == {0.2, 0.45}
    assert grey[0.2] == pytest.approx(2 * grey[0.45], rel=0.01)
