"""Episode identity (analysis/identity.py): what counts as the same episode twice."""

from __future__ import annotations

import pytest

from analysis_builders import episode
from flatscore.analysis.identity import episode_key, unique_episodes
from flatscore.analysis.notices import Notice
from flatscore.episode import Episode, TerminationReason
from flatscore.errors import InputError


def test_two_models_with_the_same_arm_name_are_not_duplicates() -> None:
    """Two models' bf16 episodes of one task and trial are two episodes (a key built on the
    arm in place of the model would take them for one read twice)."""
    a = episode("bf16", "t1", 0, model="qwen")
    b = episode("bf16", "t1", 0, model="llama")
    assert episode_key(a) != episode_key(b)
    kept, notices = unique_episodes([("a.jsonl", a), ("b.jsonl", b)])
    assert kept == [a, b] and notices == []


def test_the_same_episode_twice_is_a_duplicate() -> None:
    a = episode("bf16", "t1", 0, model="qwen")
    with pytest.raises(InputError, match=r"duplicate episode .* model qwen"):
        unique_episodes([("a.jsonl", a), ("b.jsonl", a)])
    kept, notices = unique_episodes([("a.jsonl", a), ("b.jsonl", a), ("a.jsonl", a)], dedupe=True)
    assert kept == [a]
    assert notices == [Notice(kind="duplicates_left_out", count=2, places=("a.jsonl", "b.jsonl"))]


def _infra(ep: Episode) -> Episode:
    return ep.model_copy(
        update={"termination_reason": TerminationReason.INFRASTRUCTURE_ERROR, "reward": None}
    )


def test_an_infrastructure_error_is_superseded_by_its_later_attempt() -> None:
    """`--resume` appends a new attempt after an infrastructure error: the latest is used."""
    ok = episode("bf16", "t1", 0, model="qwen")
    other = episode("bf16", "t2", 0, model="qwen")
    failed = _infra(ok)
    kept, notices = unique_episodes(
        [("r.jsonl", failed), ("r.jsonl", other), ("r.jsonl", _infra(ok)), ("r.jsonl", ok)]
    )
    assert kept == [ok, other]  # in the order each episode first appeared
    assert notices == [Notice(kind="attempts_superseded", count=2)]
    kept, notices = unique_episodes([("r.jsonl", failed)])  # the latest failed too: kept
    assert kept == [failed] and notices == []


def test_a_result_followed_by_anything_is_a_duplicate() -> None:
    """Only an infrastructure error can be superseded: a second record after a result (the
    file read twice, or a failure after a result) is a duplicate."""
    ok = episode("bf16", "t1", 0, model="qwen")
    for later in (ok, _infra(ok)):
        with pytest.raises(InputError, match="duplicate episode"):
            unique_episodes([("a.jsonl", ok), ("b.jsonl", later)])
