"""Loop diagnostics on hand-built episodes: failed calls that repeat the call that had just
failed, and calls that re-issue a call that already succeeded (known answers), per arm, in
the comparison and beside the noise floor."""

from __future__ import annotations

from typing import Any

import pytest

from analysis_builders import agent_call, cell, episode_of
from flatscore.analysis.analyze import AnalysisOptions, analyze
from flatscore.analysis.channels import load_rules
from flatscore.analysis.facts import episode_facts, loops
from flatscore.episode import Episode, Message, TerminationReason, ToolLists

OPTS = AnalysisOptions(bootstrap=200, bootstrap_min_tasks=2, seed=0, reference="ref")
TOOLS = ToolLists(agent=["get_user", "get_order"], user=[])


def _episode(arm: str, task: str, trial: int, calls: list[tuple[str, Any, str | None]]) -> Episode:
    messages = [Message(role="user", content="hi")]
    for i, (name, args, outcome) in enumerate(calls):
        messages += agent_call(f"c{i}", name, outcome, arguments=args)
    messages.append(Message(role="assistant", content="done"))
    return episode_of(
        cell(task, trial, arm=arm, domain="retail"),
        messages,
        success=True,
        termination=TerminationReason.USER_STOP,
        max_errors=10,
        tools=TOOLS,
    )


LOOPY = [
    ("get_order", {"id": 1}, "fail"),
    ("get_order", {"id": 1}, "fail"),  # repeats the call that had just failed
    ("get_order", {"id": 2}, "fail"),  # other arguments: not a repeat
    ("get_user", {"a": 1, "b": 2}, "ok"),
    ("get_order", {"id": 2}, "fail"),  # the previous call succeeded: not a repeat
    ("get_user", {"b": 2, "a": 1}, "ok"),  # re-issues a succeeded call (key order ignored)
    ("get_order", {"id": 3}, None),  # unanswered: neither, and skipped over
    ("get_user", {"a": 1, "b": 2}, "fail"),  # re-issues a succeeded call, and fails
    ("get_user", {"a": 1, "b": 2}, "fail"),  # a repeat and a re-issue
]


def test_known_answer_one_episode() -> None:
    f = episode_facts(_episode("ref", "t1", 0, LOOPY), load_rules())
    assert (f.agent_failed, f.agent_calls) == (6, 9)
    assert (f.repeats, f.reissued, f.reissued_failed) == (2, 3, 2)


def test_loops_on_plain_sequences() -> None:
    assert loops([], []) == (0, 0, 0)
    assert loops([True, True, True], ["a", "a", "a"]) == (2, 0, 0)
    assert loops([False, False, True], ["a", "a", "a"]) == (0, 2, 1)
    assert loops([True, False, True], ["a", "b", "a"]) == (0, 0, 0)  # not the call just failed


def test_arm_shares_comparison_and_floor() -> None:
    """Two tasks × two trials. ref: LOOPY in every episode (2 of 6 failed calls repeat,
    3 of 9 calls re-issue). int4: every failed call repeats the one before it:
    get_order ×4 failing (3 of 4 repeat), get_user twice ok (1 of 6 re-issues)."""
    stuck = [("get_order", {"id": 1}, "fail")] * 4 + [("get_user", {}, "ok")] * 2
    eps = [
        _episode(arm, f"t{t}", k, LOOPY if arm == "ref" else stuck)
        for arm in ("ref", "int4")
        for t in range(2)
        for k in range(2)
    ]
    result = analyze(eps, OPTS)
    (c,) = result.cells
    ref, int4 = c.arms
    assert (ref.repeated_failed_calls, ref.reissued_calls, ref.reissued_failed_calls) == (8, 12, 8)
    assert ref.repeat_share == pytest.approx(2 / 6) and ref.reissue_share == pytest.approx(3 / 9)
    assert int4.repeat_share == pytest.approx(3 / 4) and int4.reissue_share == pytest.approx(1 / 6)
    (comp,) = c.comparisons
    assert comp.repeat_difference is not None and comp.reissue_difference is not None
    assert comp.repeat_difference.value == pytest.approx(3 / 4 - 2 / 6)
    assert comp.reissue_difference.value == pytest.approx(1 / 6 - 3 / 9)
    floor = comp.noise_floor
    assert floor is not None
    # every reference episode is the same: its halves do not differ at all
    for key in ("repeat_difference", "reissue_difference"):
        d = floor.diagnostics[key]
        assert d.kind == "difference" and d.floor == 0.0
    assert floor.diagnostics["repeat_difference"].arm == pytest.approx(3 / 4 - 2 / 6)
