"""A sequential run looks ahead: engines done with a look go on with the next looks' jobs,
whose episodes are written when their batch begins if their arm still runs and discarded if
it was decided — so the run files hold what the run look by look writes."""

from __future__ import annotations

import asyncio
import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from flatscore.analysis.sequential import SequentialDesign
from flatscore.episode import Episode
from flatscore.run.driver import plan_study, run_study
from flatscore.run.executors import LocalExecutor
from flatscore.run.jobs import EpisodeJob
from flatscore.run.look_ahead import HeldFiles, LookAhead
from flatscore.run.sequential import SequentialPlan
from flatscore.run.sources import run_job
from flatscore.run.study import load_study
from flatscore.store.jsonl import held_file, read_episodes
from run_files import SEQUENTIAL_STUDY


def _study_file(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "seq.yaml"
    path.write_text(SEQUENTIAL_STUDY.replace("concurrency: 2", "concurrency: 4"), encoding="utf-8")
    return path


def _episode(job: EpisodeJob) -> Episode:
    return asyncio.run(run_job(job))


def test_look_ahead_holds_the_next_looks_episodes_until_their_batch(tmp_path: Path) -> None:
    plan = plan_study(load_study(_study_file(tmp_path)))
    seq = SequentialPlan(plan.jobs, 300, SequentialDesign(first_look=8, look_every=8).looks)
    ahead = LookAhead(seq, finished=set())  # two looks ahead
    write, queued = ahead.start()
    assert write == []
    first, second, third = seq.batch(0), seq.batch(1), seq.batch(2)
    assert queued == [*first, *second, *third]  # look 0's first: within an arm they start first

    early = next(j for j in second if j.arm == "ref")  # an engine done with look 0 goes on
    later = next(j for j in third if j.arm == "same")  # and on
    slips = next(j for j in second if j.arm == "slips")
    for job in (early, later, slips):
        assert ahead.receive(_episode(job)) is None and not ahead.look_due  # held
    for job in first[:-1]:
        assert ahead.receive(_episode(job)) == job
    assert not ahead.look_due
    assert ahead.receive(_episode(first[-1])) == first[-1]
    assert ahead.look_due

    state = seq.cells[("oracle", "retail")]
    state.open_arms, state.reference = {"same"}, "ref"  # look 0 decides `slips`
    write, queue = ahead.advance()
    assert [job for job, _ in write] == [early]  # look 1's batch begins: written
    assert set(ahead.held) == {later.episode_id}  # look 2's: still held
    assert ahead.discarded == 1  # slips' episode
    assert ahead.still_held() == {later.episode_id}
    assert not any(ahead.wanted(j) for j in [*second, *third] if j.arm == "slips")
    assert set(ahead.current) == {j.episode_id for j in second if j.arm != "slips" and j != early}
    assert queue == []  # looks 1 and 2 were queued already; there is no look 3

    for job in list(ahead.current.values()):
        ahead.receive(_episode(job))
    write, queue = ahead.advance()  # look 1 decides nothing
    assert [job for job, _ in write] == [later] and ahead.ran_ahead == 2
    assert set(ahead.current) == {j.episode_id for j in third if j.arm != "slips" and j != later}


def test_one_look_ahead_queues_only_the_next_looks_jobs(tmp_path: Path) -> None:
    plan = plan_study(load_study(_study_file(tmp_path)))
    seq = SequentialPlan(plan.jobs, 300, SequentialDesign(first_look=8, look_every=8).looks)
    ahead = LookAhead(seq, finished=set(), depth=1)
    assert ahead.start() == ([], [*seq.batch(0), *seq.batch(1)])
    for job in seq.batch(0):
        ahead.receive(_episode(job))
    assert ahead.advance() == ([], seq.batch(2))


def test_a_resumed_run_reads_the_looks_it_already_has_at_once(tmp_path: Path) -> None:
    plan = plan_study(load_study(_study_file(tmp_path)))
    seq = SequentialPlan(plan.jobs, 300, SequentialDesign(first_look=8, look_every=8).looks)
    ahead = LookAhead(seq, finished={j.episode_id for j in seq.batch(0)})
    assert ahead.start() == ([], [*seq.batch(1), *seq.batch(2)]) and ahead.look_due


def test_a_stopped_runs_held_episodes_come_back_instead_of_running_again(
    tmp_path: Path,
) -> None:
    plan = plan_study(load_study(_study_file(tmp_path)))
    seq = SequentialPlan(plan.jobs, 300, SequentialDesign(first_look=8, look_every=8).looks)
    first, second = seq.batch(0), seq.batch(1)
    files = HeldFiles([tmp_path / "out" / "runs" / "oracle__ref.jsonl"])
    kept = [job for job in second if job.arm == "ref"][:2]
    for job in kept:  # a run that held two episodes of look 1, then stopped
        files.keep(
            job.model_copy(update={"run": str(tmp_path / "out/runs/oracle__ref.jsonl")}),
            _episode(job),
        )
    files.close()
    assert held_file(tmp_path / "out/runs/oracle__ref.jsonl").exists()
    stash = files.stash()
    assert set(stash) == {job.episode_id for job in kept}

    # resumed with look 0 done but one of its episodes (first[0]) among the stash as well
    done = {j.episode_id for j in first[1:]}
    ahead = LookAhead(seq, finished=done, stash={**stash, first[0].episode_id: _episode(first[0])})
    write, queued = ahead.start()
    assert [job for job, _ in write] == [first[0]]  # look 0's: written at once
    assert ahead.look_due and set(ahead.held) == set(stash)
    assert not {j.episode_id for j in queued} & set(stash)  # not run again
    write, _ = ahead.advance()
    assert {job.episode_id for job, _ in write} == set(stash) and ahead.restored == 3
    files.remove()
    assert not held_file(tmp_path / "out/runs/oracle__ref.jsonl").exists()


def test_held_files_are_pruned_of_what_is_no_longer_held(tmp_path: Path) -> None:
    plan = plan_study(load_study(_study_file(tmp_path)))
    jobs = [j for j in plan.jobs if j.arm == "ref"][:3]
    run = tmp_path / "out" / "runs" / "oracle__ref.jsonl"
    files = HeldFiles([run])
    for job in jobs:
        files.keep(job.model_copy(update={"run": str(run)}), _episode(job))
    lines = held_file(run).read_text("utf-8").splitlines(keepends=True)
    before = held_file(run).stat().st_mtime_ns
    files.prune({j.episode_id for j in jobs})  # all still held: the file is left alone
    assert held_file(run).stat().st_mtime_ns == before
    files.prune({jobs[0].episode_id, jobs[2].episode_id})
    assert held_file(run).read_text("utf-8") == lines[0] + lines[2]  # byte for byte
    files.keep(jobs[1].model_copy(update={"run": str(run)}), _episode(jobs[1]))  # appends again
    assert set(files.stash()) == {j.episode_id for j in jobs}
    files.prune(set())
    assert not held_file(run).exists()


PruneCall = tuple[set[str], set[str], set[str]]
"""What `HeldFiles.prune` was asked to keep, and the held ids before and after."""


@pytest.fixture(scope="module")
def slow_same(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, list[PruneCall]]:
    """The study run in this process with `same`'s episodes slowed down, so `ref` and
    `slips` finish each look first and run ahead; every prune of the held files recorded."""
    folder = tmp_path_factory.mktemp("ahead")
    study = load_study(_study_file(folder))
    import flatscore.run.executors.local as local

    async def slowed(job: EpisodeJob) -> Episode:
        await asyncio.sleep(0.3 if job.arm == "same" else 0.0)
        return await run_job(job)

    calls: list[PruneCall] = []
    real_prune = HeldFiles.prune

    def recorded(self: HeldFiles, keep: set[str]) -> None:
        before = set(self.stash())
        real_prune(self, keep)
        calls.append((keep, before, set(self.stash())))

    out = io.StringIO()
    patch = pytest.MonkeyPatch()
    patch.setattr(local, "run_job", slowed)
    patch.setattr(HeldFiles, "prune", recorded)
    try:
        outcome = run_study(
            study,
            executor=LocalExecutor(4),
            progress=False,
            console=Console(file=out, width=200),
        )
    finally:
        patch.undo()
    assert outcome.analysis is not None
    return folder, out.getvalue(), calls


@pytest.mark.slow  # a whole look-ahead study; fast: the two tests above
def test_the_run_files_hold_what_the_run_look_by_look_writes(
    slow_same: tuple[Path, str, list[PruneCall]],
) -> None:
    folder, printed, prunes = slow_same
    runs = folder / "out" / "runs"
    episodes = {p.stem.split("__")[1]: list(read_episodes(p)) for p in runs.glob("*.jsonl")}
    analysis = json.loads((folder / "out" / "analysis.json").read_text("utf-8"))
    sequential = {c["arm"]: c["sequential"] for c in analysis["cells"][0]["comparisons"]}
    assert sequential["slips"]["decided"] and sequential["slips"]["tasks"] < 24
    for arm, read in (("slips", sequential["slips"]["tasks"]), ("same", 24), ("ref", 24)):
        ranks = sorted(ep.metadata["task_rank"] for ep in episodes[arm])
        assert ranks == sorted(list(range(read)) * 2), arm  # every trial of every task read
    found = re.search(
        r"ran ahead of their look: (\d+) episodes written .*, (\d+) discarded", printed
    )
    assert found is not None, printed
    written, discarded = int(found[1]), int(found[2])
    assert not list(runs.glob("*.ahead"))  # the run is complete: nothing held is left
    assert written > 0  # engines went on while `same` finished each look
    assert discarded > 0  # `slips` ran ahead into the look it was decided before
    # after every look the held files keep only what may still be written; `slips`'
    # episodes held past its decision were dropped from them
    assert prunes and all(after <= keep for keep, _, after in prunes)
    arm_of = {j.episode_id: j.arm for j in plan_study(load_study(folder / "seq.yaml")).jobs}
    recorded = {ep.episode_id for ep in episodes["slips"]}
    dropped: set[str] = set().union(*(before - after for _, before, after in prunes))
    assert "slips" in {arm_of[key] for key in dropped - recorded}
