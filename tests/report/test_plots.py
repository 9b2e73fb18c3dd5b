"""The SVG figures: valid inline SVG, byte-stable, unique ids, labels escaped, ranks right."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import rankdata

from flatscore.report import plots

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


def _line_styles(svg: str) -> list[tuple[str, str]]:
    """(dash pattern, marker id) of each data line with markers in an SVG (clipped to the
    axes: the tick marks and the legend's samples are not)."""
    root = ET.fromstring(svg)
    out = []
    for g in root.iter():
        if g.get("id", "").startswith("plot-") and "line2d" in g.get("id", ""):
            path = next((p for p in g.iter() if p.tag.endswith("path")), None)
            use = next((u for u in g.iter() if u.tag.endswith("use")), None)
            if path is not None and use is not None and path.get("clip-path"):  # data, not ticks
                style = path.get("style", "")
                dash = re.search(r"stroke-dasharray: ([^;]+)", style)
                href = use.get("{http://www.w3.org/1999/xlink}href") or use.get("href") or ""
                out.append((dash.group(1) if dash else "solid", href))
    return out


def test_coinciding_lines_stay_visible() -> None:
    """An arm identical to the reference (the demo's int8 on retail) must not hide it: each
    line has its own dash pattern and marker shape."""
    same = [plots.Band(name, [0, 1, 2], [0.5, 0.6, 0.6]) for name in ("ref", "int8", "int4")]
    styles = _line_styles(plots.budget_figure("same", same, [], 2, 0))
    assert len(styles) == 3
    assert len({d for d, _ in styles}) == 3 and len({m for _, m in styles}) == 3, styles


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
