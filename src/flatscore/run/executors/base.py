"""The pluggable executor interface.

An executor takes `EpisodeJob`s (`flatscore.run.jobs`) and yields finished `Episode`s as
they complete; it never writes files. The study driver owns the run files and is the one
writer, so a local run and a Ray run produce the same JSONL, and resume works the same way
for both. Each job is run by the episode source that planned it (`run_job`,
`flatscore.run.sources`); sources never call executors back.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Callable, Iterable, Sequence

from flatscore.episode import Episode
from flatscore.run.jobs import EpisodeJob
from flatscore.run.sources import run_job


class JobFeed:
    """The jobs a `map` runs, which its caller may extend or withdraw from while it handles
    an episode: a sequential run adds the next look's jobs before the look is read and
    withdraws a decided arm's (`flatscore.run.look_ahead`). Jobs start in the order they
    were added (within an executor's own rules); the map ends when no job is pending or in
    flight, so whatever the caller adds while it handles the last episode still runs."""

    def __init__(self, jobs: Iterable[EpisodeJob] = ()) -> None:
        self.pending: list[EpisodeJob] = list(jobs)

    def __bool__(self) -> bool:
        return bool(self.pending)

    def add(self, jobs: Iterable[EpisodeJob]) -> None:
        self.pending.extend(jobs)

    def drop(self, withdrawn: Callable[[EpisodeJob], bool]) -> None:
        """Withdraw the pending jobs `withdrawn` names (jobs already started run on)."""
        self.pending = [job for job in self.pending if not withdrawn(job)]

    def pop(self, index: int = 0) -> EpisodeJob:
        return self.pending.pop(index)


def as_feed(jobs: Sequence[EpisodeJob] | JobFeed) -> JobFeed:
    return jobs if isinstance(jobs, JobFeed) else JobFeed(jobs)


class Executor(ABC):
    """Runs episode jobs; yields each finished episode once, in completion order."""

    name: str = "executor"

    @abstractmethod
    def map(self, jobs: Sequence[EpisodeJob] | JobFeed) -> AsyncGenerator[Episode, None]:
        """An async iterator over the finished episodes of `jobs` (any order); with a
        `JobFeed`, also of the jobs added to it before the iterator ends."""

    def close(self) -> None:  # noqa: B027  optional hook
        """Release workers or connections."""


_LOOP: asyncio.AbstractEventLoop | None = None


def run_job_sync(job: EpisodeJob) -> Episode:
    """`run_job` from synchronous code (a Ray worker). One event loop per process, kept:
    cached backends may hold loop-bound state (an endpoint's semaphore)."""
    global _LOOP
    if _LOOP is None or _LOOP.is_closed():
        _LOOP = asyncio.new_event_loop()
    return _LOOP.run_until_complete(run_job(job))
