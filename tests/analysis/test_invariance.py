"""`rank_rows` (the noise floor's and the ρ bootstrap's ranking) is scipy's average rank to
the bit: ties, absent names ranked −inf, any row length."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.stats import rankdata

from flatscore.analysis.invariance import rank_rows

_VALUES = st.sampled_from([-np.inf, 0.0, 1.0, 2.0, 1 / 3, 2 / 3, 7.0])


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 6).flatmap(
        lambda rows: st.integers(1, 12).flatmap(
            lambda cols: arrays(np.float64, (rows, cols), elements=_VALUES)
        )
    )
)
def test_rank_rows_is_scipys_average_rank(x: np.ndarray) -> None:
    assert np.array_equal(rank_rows(x), rankdata(x, axis=1))


def test_rank_rows_known_answer() -> None:
    x = np.array([[3.0, 1.0, 3.0, -np.inf], [0.0, 0.0, 0.0, 5.0]])
    assert rank_rows(x).tolist() == [[3.5, 2.0, 3.5, 1.0], [2.0, 2.0, 2.0, 4.0]]
