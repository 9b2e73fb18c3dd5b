"""A sequential run without recorded task ranks is replayed in the order its tasks were
complete: a task counts as read when its *last* episode (every arm, every trial) finished,
not its first (`sequential_replay`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from analysis_builders import episode
from flatscore.analysis.channels import load_rules
from flatscore.analysis.facts import episode_facts
from flatscore.analysis.result import Cell
from flatscore.analysis.sequential_replay import _task_order, finish_ranks
from flatscore.episode import Episode, Timing

START = datetime(2026, 1, 1, tzinfo=UTC)
FINISHED = {  # (arm, task, trial) → minute its episode finished
    ("ref", "a", 0): 0,
    ("q", "a", 0): 1,
    ("ref", "a", 1): 2,
    ("q", "a", 1): 30,  # task a is complete only at minute 30
    ("ref", "b", 0): 10,
    ("q", "b", 0): 11,
    ("ref", "b", 1): 12,
    ("q", "b", 1): 13,  # task b at minute 13
    ("ref", "c", 0): 20,
    ("q", "c", 0): 21,
    ("ref", "c", 1): 22,
    ("q", "c", 1): 23,  # task c at minute 23
}


def _episodes() -> list[Episode]:
    out = []
    for (arm, task, trial), minute in FINISHED.items():
        ep = episode(arm, task, trial, [("get_user", "ok")])
        out.append(
            ep.model_copy(
                update={
                    "metadata": {"stopping": "sequential"},
                    "timing": Timing(ended_at=(START + timedelta(minutes=minute)).isoformat()),
                }
            )
        )
    return out


def test_tasks_are_read_when_their_last_episode_finished() -> None:
    episodes = _episodes()
    ranks, sequential = finish_ranks(episodes)
    assert sequential == {("m", "retail")}
    rules = load_rules()
    arms = {
        arm: [episode_facts(e, rules) for e in episodes if e.arm == arm] for arm in ("ref", "q")
    }
    cell = Cell.model_construct(model="m", domain="retail")
    order = _task_order(cell, arms, ["a", "b", "c"], ranks, True, seed=0, planned={})
    assert order == ["b", "c", "a"]  # by first episode it would be a, b, c


def test_recorded_task_ranks_win_over_finish_times() -> None:
    episodes = _episodes()
    ranks, _ = finish_ranks(episodes)
    rules = load_rules()
    arms = {"ref": [episode_facts(e, rules) for e in episodes if e.arm == "ref"]}
    cell = Cell.model_construct(model="m", domain="retail")
    planned = {"a": 0, "b": 2, "c": 1}
    order = _task_order(cell, arms, ["a", "b", "c"], ranks, True, seed=0, planned=planned)
    assert order == ["a", "c", "b"]  # finish times would give b, c, a
