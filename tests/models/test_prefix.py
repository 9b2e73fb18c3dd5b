"""`common_prefix`: the leading tokens two sequences share (both batch engines' prefix cache)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from flatscore.models.prefix import common_prefix


def test_known_answers() -> None:
    assert common_prefix([], []) == 0
    assert common_prefix([1, 2, 3], []) == 0
    assert common_prefix([1, 2, 3], [1, 2, 3]) == 3
    assert common_prefix([1, 2, 3], [1, 2]) == 2  # one is a prefix of the other
    assert common_prefix([1, 2, 3], [1, 9, 3]) == 1  # parts at the first difference only
    assert common_prefix([7], [8]) == 0
    assert common_prefix((1, 2, 4), [1, 2, 5]) == 2  # a cache key (tuple) against a prompt


tokens = st.lists(st.integers(0, 3), max_size=30)


@given(tokens, tokens)
def test_shared_then_parted_or_ended(a: list[int], b: list[int]) -> None:
    n = common_prefix(a, b)
    assert a[:n] == b[:n]
    assert n == min(len(a), len(b)) or a[n] != b[n]
    assert common_prefix(b, a) == n
