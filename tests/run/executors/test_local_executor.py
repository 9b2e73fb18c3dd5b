"""The local executor runs every job once, at most `concurrency` at a time, each run file
(arm) at most its fair share of the slots."""

from __future__ import annotations

import asyncio
from collections import Counter
from types import SimpleNamespace

import pytest

from flatscore.run.executors import LocalExecutor
from flatscore.run.jobs import EpisodeJob
from run_files import oracle_jobs

jobs = oracle_jobs


async def collect(executor: LocalExecutor, js: list[EpisodeJob]) -> list[str]:
    return [ep.episode_id async for ep in executor.map(js)]


@pytest.mark.parametrize("concurrency", [1, 3])
def test_every_job_once(concurrency: int) -> None:
    js = jobs()
    ids = asyncio.run(collect(LocalExecutor(concurrency), js))
    assert sorted(ids) == sorted(j.episode_id for j in js)


def test_concurrency_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import flatscore.run.executors.local as local

    running = peak = 0
    real = local.run_job

    async def counting(job: EpisodeJob):  # type: ignore[no-untyped-def]
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        try:
            return await real(job)
        finally:
            running -= 1

    monkeypatch.setattr(local, "run_job", counting)
    asyncio.run(collect(LocalExecutor(2), jobs(run="one-run")))
    assert peak == 2


def test_a_slow_arm_cannot_hoard_the_slots(monkeypatch: pytest.MonkeyPatch) -> None:
    """Arm `slow` takes 10× longer per episode. Taking jobs in plain study order, it would
    fill most of the slots; with fair shares it holds at most ⌈4 / 2⌉ = 2 while `fast` still
    has episodes, and the slots `fast` no longer needs go to `slow` at the end."""
    import flatscore.run.executors.local as local

    in_flight: Counter[str] = Counter()
    fast_left = 0
    peak_while_shared = peak_alone = 0
    started: list[str] = []

    async def timed(job: EpisodeJob):  # type: ignore[no-untyped-def]
        """Stands in for running the episode: the schedule, not the episode, is tested."""
        nonlocal fast_left, peak_while_shared, peak_alone
        in_flight[job.arm] += 1
        started.append(f"{job.arm}/{job.task_id}")
        if job.arm == "slow":
            if fast_left:
                peak_while_shared = max(peak_while_shared, in_flight["slow"])
            else:
                peak_alone = max(peak_alone, in_flight["slow"])
        try:
            await asyncio.sleep(0.05 if job.arm == "slow" else 0.005)
            return SimpleNamespace(episode_id=job.episode_id)
        finally:
            in_flight[job.arm] -= 1
            if job.arm == "fast":
                fast_left -= 1

    monkeypatch.setattr(local, "run_job", timed)
    js = jobs(n_tasks=8, arms=("fast", "slow"))
    fast_left = 8
    ids = asyncio.run(collect(LocalExecutor(4), js))
    assert sorted(ids) == sorted(j.episode_id for j in js)
    assert peak_while_shared == 2
    assert peak_alone > 2  # fast's share went to slow once fast was done
    # within each arm, jobs start in the study's order
    for arm in ("fast", "slow"):
        mine = [s.split("/")[1] for s in started if s.startswith(f"{arm}/")]
        assert mine == [j.task_id for j in js if j.arm == arm]


def test_fewer_slots_than_runs_still_runs_everything() -> None:
    js = jobs(n_tasks=2, arms=("a", "b", "c", "d", "e"))
    ids = asyncio.run(collect(LocalExecutor(2), js))
    assert sorted(ids) == sorted(j.episode_id for j in js)


def test_bad_concurrency() -> None:
    with pytest.raises(ValueError):
        LocalExecutor(0)
