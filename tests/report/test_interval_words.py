"""Words checked against their intervals: the first screen's "level" / "further apart" sentence
(`report.first_screen`) says "level" only where the default budget's gap interval holds 0,
makes no masking claim where the small budget's does, and every signed number in points
prints without "-0.0" — each template tried with intervals on both sides of its threshold."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flatscore.analysis.result import GapPoint
from flatscore.analysis.stats import points
from flatscore.report.first_screen import _masked_line, interval_words
from flatscore.report.verdict_reason import beyond_words
from flatscore.report.verdicts import signed_ci_pts, signed_pts


def _comparison(small: tuple[float, float, float], default: tuple[float, float, float]):
    points = [
        GapPoint(K=k, gap=g, ci_low=lo, ci_high=hi, s_ref=0.6, s_arm=0.5)
        for k, (g, lo, hi) in ((0, small), (9, default))
    ]
    return SimpleNamespace(arm="planted", reference="ref", gap=points)


@pytest.mark.parametrize(
    ("low", "high", "words"),
    [
        (-0.02, 0.05, "level"),
        (0.0, 0.05, "level"),  # an end on 0 still holds 0
        (0.007, 0.077, "apart"),  # the demo's 3.9 [0.7, 7.7]: not level
        (-0.08, -0.01, "ahead"),
        (None, 0.05, "unknown"),
    ],
)
def test_interval_words_follow_the_interval(low, high, words) -> None:
    assert interval_words(low, high) == words


def test_level_only_where_the_default_interval_holds_zero() -> None:
    level = _masked_line(_comparison((0.16, 0.12, 0.22), (0.01, -0.02, 0.05)), 9)
    assert level is not None and "level with ref's at K = 9" in level
    assert "(gap +1.0 [-2.0, +5.0] points)" in level
    below = _masked_line(_comparison((0.16, 0.12, 0.22), (0.039, 0.007, 0.077)), 9)
    assert below is not None and "level" not in below
    assert "below ref's at K = 9 (gap +3.9 [+0.7, +7.7] points)" in below
    assert "further apart at K = 0 (gap +16.0 [+12.0, +22.0] points)" in below


def test_no_masking_claim_where_the_small_budget_is_not_apart() -> None:
    assert _masked_line(_comparison((0.05, -0.01, 0.11), (0.01, -0.02, 0.05)), 9) is None
    assert _masked_line(_comparison((0.05, 0.001, 0.11), (0.01, -0.02, 0.05)), 9) is not None


@pytest.mark.parametrize(
    ("value", "text"),
    [(-0.0, "0.0"), (-0.0004, "0.0"), (0.0004, "0.0"), (-0.0006, "-0.1"), (0.015, "+1.5")],
)
def test_signed_points_never_print_minus_zero(value: float, text: str) -> None:
    assert signed_pts(value) == text


@given(st.floats(-1, 1), st.floats(-1, 1))
def test_no_signed_interval_prints_minus_zero(a: float, b: float) -> None:
    text = signed_ci_pts(min(a, b), max(a, b))
    assert "-0.0]" not in text and "[-0.0," not in text


@pytest.mark.parametrize(
    ("ci_low", "words"),
    [
        (0.38, "is shown (the 95% interval's lower end +38.0 points)"),  # wholly beyond
        (0.076, "is shown"),
        (0.074, "is not ruled out (the 90% interval's upper end +62.9 points)"),
        (0.01, "is not ruled out"),
    ],
)
def test_a_significant_drop_beyond_the_margin_is_shown_only_where_the_interval_says(
    ci_low: float, words: str
) -> None:
    drop = SimpleNamespace(ci_low=ci_low, drop_bound=0.629)
    evidence = SimpleNamespace(margin=0.075, alpha=0.05)
    text = beyond_words(drop, evidence)  # type: ignore[arg-type]
    assert text.startswith("a drop beyond ±7.5 points ") and words in text


@pytest.mark.parametrize(("x", "text"), [(-0.0004, "+0.0 points"), (-0.0, "+0.0 points")])
def test_the_verdict_reasons_never_print_minus_zero(x: float, text: str) -> None:
    assert points(x) == text
