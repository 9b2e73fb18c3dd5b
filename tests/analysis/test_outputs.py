"""JSON outputs with floats to `defaults.JSON_DIGITS` significant digits (`rounded_json`):
the same text as pydantic's own where nothing needs rounding, and a last-bit difference
(another CPU's exp or sum) gives the same file."""

from __future__ import annotations

import json
import math

from hypothesis import given
from hypothesis import strategies as st

from flatscore.analysis.outputs import Interval, rounded_json


def test_short_floats_read_exactly_as_pydantic_writes_them() -> None:
    iv = Interval(value=0.25, ci_low=-1.5e-09, ci_high=None, note="é")
    assert rounded_json(iv) == iv.model_dump_json(indent=2)


def test_floats_are_rounded_to_ten_significant_digits() -> None:
    iv = Interval(value=1.8163368533080653, ci_low=2.230504543576688e-07, ci_high=0.0)
    data = json.loads(rounded_json(iv))
    assert data == {"value": 1.816336853, "ci_low": 2.230504544e-07, "ci_high": 0.0, "note": None}


@given(st.floats(min_value=1e-300, max_value=1e300))
def test_one_ulp_apart_rounds_alike_away_from_a_boundary(x: float) -> None:
    y = math.nextafter(x, math.inf)
    nearest = float(f"{x:.9e}")  # ten significant digits
    half_unit = 10.0 ** (math.floor(math.log10(abs(nearest))) - 9) / 2
    if half_unit - abs(x - nearest) > 4 * math.ulp(x):  # not within a few ulps of a tie
        assert rounded_json(Interval(value=x)) == rounded_json(Interval(value=y))
