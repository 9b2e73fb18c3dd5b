"""Episode identity (analysis/identity.py): what counts as the same episode twice."""

from __future__ import annotations

import pytest

from analysis_builders import episode
from flatscore.analysis.identity import episode_key, unique_episodes
from flatscore.errors import InputError


def test_two_models_with_the_same_arm_name_are_not_duplicates() -> None:
    """Two models' bf16 episodes of one task and trial are two episodes (a key built on the
    arm in place of the model would take them for one read twice)."""
    a = episode("bf16", "t1", 0, model="qwen")
    b = episode("bf16", "t1", 0, model="llama")
    assert episode_key(a) != episode_key(b)
    kept, warnings = unique_episodes([("a.jsonl", a), ("b.jsonl", b)])
    assert kept == [a, b] and warnings == []


def test_the_same_episode_twice_is_a_duplicate() -> None:
    a = episode("bf16", "t1", 0, model="qwen")
    with pytest.raises(InputError, match=r"duplicate episode .* model qwen"):
        unique_episodes([("a.jsonl", a), ("b.jsonl", a)])
    kept, warnings = unique_episodes([("a.jsonl", a), ("b.jsonl", a)], dedupe=True)
    assert kept == [a] and "1 duplicate" in warnings[0]
