"""A training set's composition read back from dataset.json records: mistakes per
conversation and per channel from the records, repeats from the token masks."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from flatscore.train.composition import composition, failing_turns

START, SYSTEM, USER, AGENT, TOOL = 1, 5, 6, 7, 8


def _turn(role: int, body: list[int], trained: bool) -> tuple[list[int], list[bool]]:
    ids = [START, role, *body]
    # the opening tokens never carry loss, as in the rendered ChatML
    return ids, [False, False, *[trained] * len(body)]


def record(
    domain: str, mistakes: list[str], repeated: list[bool], *, detour: bool = False
) -> dict[str, Any]:
    """A conversation as `load_dataset` stores it: system, the untrained greeting, then per
    planted mistake its failing call (untrained; twice when repeated) and the tool's error,
    then a trained correction; a trained closing turn."""
    turns = [_turn(SYSTEM, [40, 41], False), _turn(AGENT, [42], False), _turn(USER, [43], False)]
    for i, twice in enumerate(repeated):
        for _ in range(2 if twice else 1):
            turns += [_turn(AGENT, [50 + i, 51], False), _turn(TOOL, [60], False)]
        turns += [_turn(AGENT, [70 + i], True), _turn(TOOL, [61], False)]
    turns.append(_turn(AGENT, [80], True))
    return {
        "domain": domain,
        "mistake": "+".join(mistakes) or None,
        "detour": detour,
        "ids": [t for ids, _ in turns for t in ids],
        "mask": [m for _, mask in turns for m in mask],
    }


def test_composition_known_answer() -> None:
    data = [
        record("retail", [], [], detour=True),
        record("retail", ["invented"], [True]),
        record("retail", ["invented", "precondition"], [False, True]),
        record("telecom", ["role_confusion", "near_miss", "invented"], [True, True, False]),
        record("telecom", [], []),
    ]
    parts = composition(data)
    retail, telecom = parts["retail"], parts["telecom"]
    assert (retail.conversations, retail.detour, retail.by_mistakes) == (3, 1, {0: 1, 1: 1, 2: 1})
    assert retail.channels == {"invented": 2, "precondition": 1}
    assert (retail.mistakes, retail.made_twice, retail.uncounted) == (3, 2, 0)
    assert telecom.by_mistakes == {0: 1, 3: 1}
    assert (telecom.mistakes, telecom.made_twice) == (3, 2)
    assert list(parts) == ["retail", "telecom"]


def test_a_conversation_cut_before_its_failing_calls_is_not_counted() -> None:
    """Cut at max_tokens after the greeting: one planted mistake, no failing turn left."""
    full = record("retail", ["near_miss"], [True])
    cut = {**full, "ids": full["ids"][:9], "mask": full["mask"][:9]}
    [part] = composition([cut]).values()
    assert (part.mistakes, part.made_twice, part.uncounted) == (1, 0, 1)


def test_failing_turns_are_the_untrained_agent_turns_after_the_greeting() -> None:
    r = record("retail", ["invented"], [True])
    assert failing_turns(r["ids"], r["mask"]) == [[START, AGENT, 50, 51]] * 2
    assert failing_turns([], []) == []


@given(st.lists(st.booleans(), max_size=5))
def test_repeats_are_recovered_from_the_tokens(repeated: list[bool]) -> None:
    data = [record("retail", ["invented"] * len(repeated), repeated)]
    [part] = composition(data).values()
    assert part.made_twice == sum(repeated)
    assert part.by_mistakes == {len(repeated): 1}
