"""The run's one writer: episodes appended to their run files and counted, bars whose totals
grow as a run learns of its jobs, and a run whose every episode failed refused."""

from __future__ import annotations

import asyncio
import io
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console

from flatscore.domains import get_domain
from flatscore.episode import Episode, ErrorBudget, TerminationReason
from flatscore.errors import RunFailed
from flatscore.run.executors.base import AgentRecipe, EpisodeJob, run_job
from flatscore.run.recorder import OVERALL, Recorder
from flatscore.run.study import UserSpec
from flatscore.store.jsonl import read_episodes


def jobs(folder: Path, n_tasks: int, arms: tuple[str, ...] = ("ref", "b")) -> list[EpisodeJob]:
    """The oracle's jobs, task by task with the arms side by side, a run file per arm."""
    tasks = [t.id for t in get_domain("retail").tasks("test")[:n_tasks]]
    return [
        EpisodeJob(
            run=str(folder / f"m__{arm}.jsonl"),
            study="s",
            arm=arm,
            domain="retail",
            task_id=task,
            trial=0,
            seed=300,
            max_steps=40,
            error_budget=ErrorBudget(max_errors=10),
            agent=AgentRecipe(label="oracle", agent="oracle"),
            user=UserSpec(),
        )
        for task in tasks
        for arm in arms
    ]


def _cell(job: EpisodeJob) -> str:
    return f"{job.agent.label} · {job.domain}"


def _episodes(js: list[EpisodeJob]) -> list[Episode]:
    return [asyncio.run(run_job(job)) for job in js]


def test_it_writes_counts_and_grows_its_bars(tmp_path: Path) -> None:
    js = jobs(tmp_path, n_tasks=3)
    files = sorted({Path(j.run) for j in js})
    with Recorder(files, _cell, Console(file=io.StringIO()), progress=False) as recorder:
        recorder.plan(js[:4], done=Counter({"oracle · retail": 1}))
        recorder.plan(js[4:])
        totals = {t.description: (t.total, t.completed) for t in recorder.bar.tasks}
        assert totals == {OVERALL: (6, 1), "oracle · retail": (6, 1)}
        episodes = _episodes(js[1:])
        for job, episode in zip(js[1:], episodes, strict=True):
            recorder.write(job, episode)
        assert recorder.bar.tasks[0].completed == 6
    counts = recorder.counts(planned=6, skipped=1, rerun=0)
    assert (counts.written, counts.skipped, counts.planned) == (5, 1, 6)
    assert counts.succeeded == sum(ep.succeeded for ep in episodes)
    assert sum(counts.terminations.values()) == 5
    assert sum(1 for path in files for _ in read_episodes(path)) == 5


def test_a_run_whose_every_episode_failed_is_refused(tmp_path: Path) -> None:
    job = jobs(tmp_path, n_tasks=1, arms=("ref",))[0]
    episode = _episodes([job])[0].model_copy(
        update={"termination_reason": TerminationReason.INFRASTRUCTURE_ERROR}
    )
    episode.metadata["error"] = "connection refused\n  at the endpoint"
    with Recorder([Path(job.run)], _cell, Console(file=io.StringIO()), progress=False) as rec:
        rec.plan([job])
        rec.write(job, episode)
    with pytest.raises(RunFailed, match="the first: connection refused at the endpoint"):
        rec.counts(planned=1, skipped=0, rerun=0)
