"""Gap amplification = Gap(K_small) / Gap(K_default) only where it reads as "the gap grows
by this factor": both gaps positive and Gap(K_default)'s interval above 0; otherwise null
with the reason as a code (worded in `tests/report/test_notes_text.py`)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flatscore.analysis.comparison import gap_amplification
from flatscore.analysis.result import GapPoint


def g(k: int, gap: float, lo: float | None, hi: float | None = None) -> GapPoint:
    return GapPoint(K=k, gap=gap, ci_low=lo, ci_high=hi, s_ref=None, s_arm=None)


def test_known_answers() -> None:
    ok = gap_amplification(g(0, 0.16, 0.11), g(9, 0.04, 0.01))
    assert ok.value == pytest.approx(4.0) and ok.note_code is None
    # study v2's telecom int8: −1.8 / −0.4 printed "4.0×" before
    neg = gap_amplification(g(0, -0.018, -0.05), g(9, -0.004, -0.035))
    assert neg.value is None and neg.note_code == "no_positive_gap"
    # retail control: Gap(0) = 0, Gap(9) = −3.5 ("−0.0×" before)
    assert gap_amplification(g(0, 0.0, -0.02), g(9, -0.035, -0.085)).value is None
    # positive but not distinguishable from 0
    noisy = gap_amplification(g(0, 0.175, 0.129), g(9, 0.022, -0.017))
    assert noisy.value is None and noisy.note_code == "gap_is_noise"
    # the small-K gap negative, the default one positive
    assert gap_amplification(g(0, -0.01, -0.05), g(9, 0.10, 0.05)).value is None


gaps = st.floats(-1, 1, allow_nan=False)


@given(gaps, gaps, st.one_of(st.none(), gaps))
def test_a_value_only_for_positive_distinguishable_gaps(small: float, default: float, lo) -> None:
    a = gap_amplification(g(0, small, None), g(9, default, lo))
    if a.value is None:
        assert a.note_code is not None
    else:
        assert small > 0 and default > 0 and lo is not None and lo > 0
        assert a.value == pytest.approx(small / default)
