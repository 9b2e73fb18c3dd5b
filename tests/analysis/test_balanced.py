"""flatscore.analysis.balanced: `--balanced` keeps exactly the (domain, task, trial) every arm
of a cell has; `repair_pairs` pairs a repair pass with its plain twins only."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from analysis_builders import episode, repaired
from flatscore.analysis.balanced import balanced, repair_pairs
from flatscore.analysis.notices import Notice, left_out
from flatscore.analysis.repair_effect import is_repaired


def test_a_complete_study_is_kept_whole_and_in_order() -> None:
    eps = [
        episode(arm, f"t{t}", trial) for arm in ("ref", "q4") for t in range(3) for trial in (0, 1)
    ]
    assert balanced(eps) == eps
    assert balanced([]) == []
    assert left_out("balanced_left_out", 12, 12) == []


def test_what_one_arm_lacks_drops_out_of_every_arm() -> None:
    """ref has tasks t0-t2 × trials 0-1; q4 lacks (t1, trial 1) and all of trial 1 of t2: the
    balanced part is t0 (both trials), t1 trial 0, t2 trial 0 — 4 keys, 8 episodes."""
    ref = [episode("ref", f"t{t}", trial) for t in range(3) for trial in (0, 1)]
    q4 = [episode("q4", "t0", 0), episode("q4", "t0", 1), episode("q4", "t1", 0)]
    q4.append(episode("q4", "t2", 0))
    kept = balanced(ref + q4)
    assert len(kept) == 8
    assert {(e.task_id, e.trial) for e in kept} == {("t0", 0), ("t0", 1), ("t1", 0), ("t2", 0)}
    assert kept == [e for e in ref + q4 if e in kept]  # the order given
    assert left_out("balanced_left_out", 10, 8) == [
        Notice(kind="balanced_left_out", count=2, total=10)
    ]


def test_cells_are_balanced_apart() -> None:
    """Model b ran telecom only: model a's retail episodes are not emptied by it, and a's
    telecom is balanced against a's arms, not b's."""
    a = [
        episode(arm, "t0", model="a", domain=d)
        for arm in ("ref", "q4")
        for d in ("retail", "telecom")
    ]
    b = [episode("ref", "t0", model="b", domain="telecom")]
    b.append(episode("ref", "t1", model="b", domain="telecom"))
    assert balanced(a + b) == a + b
    c = [episode("ref", "t1", model="a", domain="retail")]  # only one arm of a has t1
    assert balanced(a + b + c) == a + b


keys = st.sets(st.tuples(st.sampled_from(["t0", "t1", "t2", "t3"]), st.integers(0, 2)), min_size=1)
"""An arm is one with episodes in the cell: one without any is not in the data to balance."""


@given(st.dictionaries(st.sampled_from(["ref", "fp8", "int4"]), keys, min_size=1))
def test_every_arm_keeps_the_same_keys_and_nothing_every_arm_has_is_lost(
    arms: dict[str, set[tuple[str, int]]],
) -> None:
    eps = [episode(arm, task, trial) for arm, have in arms.items() for task, trial in sorted(have)]
    kept = balanced(eps)
    common = set.intersection(*arms.values())
    for arm in arms:
        assert {(e.task_id, e.trial) for e in kept if e.arm == arm} == common
    assert len(kept) == len(arms) * len(common)
    assert balanced(kept) == kept  # idempotent


def test_repair_pairs_keep_the_repaired_arms_and_their_twins() -> None:
    """A main study of 2 trials on ref, int4 and fp8; a repair pass of trial 0 on ref and
    int4, where int4+repair lacks t2: pairs are trial 0 of t0-t1 for ref, ref+repair, int4
    and int4+repair; fp8 (never repaired) and trial 1 stay out."""
    main = [
        episode(arm, f"t{t}", trial)
        for arm in ("ref", "int4", "fp8")
        for t in range(3)
        for trial in (0, 1)
    ]
    repair = [repaired(episode("ref", f"t{t}", 0)) for t in range(3)]
    repair += [repaired(episode("int4", f"t{t}", 0)) for t in range(2)]
    pairs = repair_pairs(main + repair)
    assert Counter((e.arm, is_repaired(e)) for e in pairs) == {
        (arm, flag): 2 for arm in ("ref", "int4") for flag in (False, True)
    }
    assert {(e.task_id, e.trial) for e in pairs} == {("t0", 0), ("t1", 0)}
    assert repair_pairs(main) == []  # nothing repaired: nothing to pair
