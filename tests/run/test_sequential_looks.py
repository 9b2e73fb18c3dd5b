"""Each look of a sequential run reads exactly the tasks before it, whatever else its run
files hold: a resumed run's files already hold later tasks (written before the kill), and
its look k must read what the uninterrupted run's look k read (`SequentialPlan.episodes_at`)."""

from __future__ import annotations

from pathlib import Path

from analysis_builders import episode
from flatscore.analysis.sequential import SequentialDesign
from flatscore.episode import Episode
from flatscore.run.driver import plan_study
from flatscore.run.sequential import SequentialPlan
from flatscore.run.study import load_study
from flatscore.store.jsonl import EpisodeWriter
from run_files import SEQUENTIAL_STUDY


def append_episodes(path: Path, episodes: list[Episode]) -> None:
    with EpisodeWriter(path) as writer:
        writer.write_all(episodes)


def _plan(tmp_path: Path) -> SequentialPlan:
    path = tmp_path / "seq.yaml"
    path.write_text(SEQUENTIAL_STUDY, encoding="utf-8")
    study = load_study(path)
    return SequentialPlan(plan_study(study).jobs, study.seed, SequentialDesign().looks)


def _episodes(plan: SequentialPlan, ranks: range) -> list[Episode]:
    order = plan.cells[("oracle", "retail")].order
    out = []
    for rank in ranks:
        for arm in ("ref", "same"):
            ep = episode(arm, order[rank], 0, [("get_user", "ok")], model="oracle")
            ep.metadata.update(stopping="sequential", task_rank=rank, sequential_max_tasks=24)
            out.append(ep)
    return out


def test_a_look_reads_the_tasks_before_it_and_no_more(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    looks = plan.cells[("oracle", "retail")].looks
    assert looks == [6, 12, 18, 24]
    resumed = tmp_path / "resumed.jsonl"  # every task written before the kill
    append_episodes(resumed, _episodes(plan, range(24)))
    for k, n in enumerate(looks):
        uninterrupted = tmp_path / f"look{k}.jsonl"  # what the run had written at look k
        append_episodes(uninterrupted, _episodes(plan, range(n)))
        read = plan.episodes_at(k, [resumed])
        assert {e.metadata["task_rank"] for e in read} == set(range(n))
        assert sorted(e.episode_id for e in read) == sorted(
            e.episode_id for e in plan.episodes_at(k, [uninterrupted])
        )


def test_episodes_of_other_cells_or_without_a_rank_are_not_read(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    stray = episode("ref", "x", 0, [("get_user", "ok")], model="other")
    stray.metadata.update(task_rank=0)
    unranked = episode("ref", "y", 0, [("get_user", "ok")], model="oracle")
    path = tmp_path / "runs.jsonl"
    append_episodes(path, [stray, unranked])
    assert plan.episodes_at(3, [path]) == []
