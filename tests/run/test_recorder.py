"""The run's one writer: episodes appended to their run files and counted, bars whose totals
grow as a run learns of its jobs, and a run whose every episode failed refused."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest
from rich.console import Console

from flatscore.episode import Episode, TerminationReason
from flatscore.errors import RunFailed
from flatscore.run.jobs import EpisodeJob
from flatscore.run.recorder import OVERALL, Recorder
from flatscore.run.sources import run_job
from flatscore.store.jsonl import read_episodes
from run_files import oracle_jobs


def _cell(job: EpisodeJob) -> str:
    return f"{job.agent.label} · {job.domain}"


def _episodes(js: list[EpisodeJob]) -> list[Episode]:
    return [asyncio.run(run_job(job)) for job in js]


def test_it_writes_counts_and_grows_its_bars(tmp_path: Path) -> None:
    js = [j.model_copy(update={"run": str(tmp_path / f"{j.run}.jsonl")}) for j in oracle_jobs(3)]
    files = sorted({Path(j.run) for j in js})
    with Recorder(files, _cell, Console(file=io.StringIO()), progress=False) as recorder:
        recorder.plan(js[:4], finished={js[0].episode_id})
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
    job = oracle_jobs(1, ("ref",), run=str(tmp_path / "m__ref.jsonl"))[0]
    episode = _episodes([job])[0].model_copy(
        update={"termination_reason": TerminationReason.INFRASTRUCTURE_ERROR}
    )
    episode.metadata["error"] = "connection refused\n  at the endpoint"
    with Recorder([Path(job.run)], _cell, Console(file=io.StringIO()), progress=False) as rec:
        rec.plan([job])
        rec.write(job, episode)
    with pytest.raises(RunFailed, match="the first: connection refused at the endpoint"):
        rec.counts(planned=1, skipped=0, rerun=0)
