"""The local executor runs every job once, at most `concurrency` at a time."""

from __future__ import annotations

import asyncio

import pytest

from flatscore.episode import ErrorBudget
from flatscore.executors import LocalExecutor
from flatscore.executors.base import AgentRecipe, EpisodeJob
from flatscore.study import UserSpec


def jobs(n_tasks: int = 4) -> list[EpisodeJob]:
    from flatscore.domains import get_domain

    tasks = [t.id for t in get_domain("retail").tasks("test")[:n_tasks]]
    return [
        EpisodeJob(
            run="r",
            study="s",
            arm=arm,
            domain="retail",
            task_id=t,
            trial=0,
            seed=300,
            max_steps=40,
            error_budget=ErrorBudget(max_errors=10),
            agent=AgentRecipe(label="oracle", agent="oracle"),
            user=UserSpec(),
        )
        for t in tasks
        for arm in ("ref", "b")
    ]


async def collect(executor: LocalExecutor, js: list[EpisodeJob]) -> list[str]:
    return [ep.episode_id async for ep in executor.map(js)]


@pytest.mark.parametrize("concurrency", [1, 3])
def test_every_job_once(concurrency: int) -> None:
    js = jobs()
    ids = asyncio.run(collect(LocalExecutor(concurrency), js))
    assert sorted(ids) == sorted(j.episode_id for j in js)


def test_concurrency_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import flatscore.executors.local as local

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
    asyncio.run(collect(LocalExecutor(2), jobs()))
    assert peak == 2


def test_bad_concurrency() -> None:
    with pytest.raises(ValueError):
        LocalExecutor(0)
