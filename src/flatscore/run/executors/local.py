"""The default executor: episodes as asyncio tasks in this process, `concurrency` at once.

`concurrency` is the number of episodes in flight. Endpoint agents overlap their HTTP
waits. In-process models (`LocalBackend.agenerate`) hand each turn to their arm's batch
engine without holding a thread: the episodes in flight of one arm share every forward pass
(continuous batching), and each arm's engine runs on its own thread, so the arms decode side
by side on the cores. Threads for a 2-core machine: one torch thread per arm
(`ModelSpec.threads`, default 1) — OpenMP threads of several arms busy-wait against each
other, while two or more arms already keep both cores busy.

**Fair share per run.** The slots are shared out between the run files (model × arm) that
still have episodes to run or in flight: each may hold at most ⌈concurrency / runs⌉. Taking
the next job in the study's order regardless of its arm is unstable: the arm whose episodes
finish slowest accumulates the freed slots (measured on the embedded study at 80 in flight:
55 int8 episodes in flight, 3–12 for each other arm), its engine queues everything beyond
one batch while the other arms' engines step half-empty padded batches. Within the share,
jobs still start in the study's (paired) order; when a run has nothing left, its share goes
to the others. Episodes do not depend on the schedule (batch invariance), only their order
in the run files does, which already depended on timing.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncGenerator, Sequence

from flatscore.episode import Episode
from flatscore.run.executors.base import Executor, JobFeed, as_feed
from flatscore.run.jobs import EpisodeJob
from flatscore.run.sources import run_job
from flatscore.run.time_limit import RunStopped, draining


class FairShare:
    """The order jobs start in: the feed's order, each run capped at its share of slots."""

    def __init__(self, jobs: Sequence[EpisodeJob] | JobFeed, concurrency: int) -> None:
        self.concurrency = concurrency
        self.feed = as_feed(jobs)
        self.in_flight: Counter[str] = Counter()

    def __bool__(self) -> bool:
        return bool(self.feed)

    def share(self) -> int:
        """The most episodes one run may hold now: the slots over the runs still active."""
        active = {job.run for job in self.feed.pending}
        active |= {run for run, n in self.in_flight.items() if n}
        return -(-self.concurrency // max(len(active), 1))

    def take(self) -> EpisodeJob | None:
        """The earliest pending job of a run under its share (None: every run is at it)."""
        if sum(self.in_flight.values()) >= self.concurrency:
            return None
        cap = self.share()
        for index, job in enumerate(self.feed.pending):
            if self.in_flight[job.run] < cap:
                self.feed.pop(index)
                self.in_flight[job.run] += 1
                return job
        return None

    def done(self, job: EpisodeJob) -> None:
        self.in_flight[job.run] -= 1


class LocalExecutor(Executor):
    name = "local"

    def __init__(self, concurrency: int = 2) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be ≥ 1")
        self.concurrency = concurrency

    async def map(self, jobs: Sequence[EpisodeJob] | JobFeed) -> AsyncGenerator[Episode, None]:
        """Start up to `concurrency` jobs (a fair share per run); yield each episode as soon
        as it finishes. Jobs added to a feed while an episode is handled start at once."""
        schedule = FairShare(jobs, self.concurrency)
        running: dict[asyncio.Task[Episode], EpisodeJob] = {}
        try:
            while schedule or running:
                while not draining() and (job := schedule.take()) is not None:
                    running[asyncio.create_task(run_job(job))] = job
                if not running:
                    raise RunStopped("the time limit was reached with episodes left to run")
                done, _ = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for task in sorted(done, key=id):
                    schedule.done(running.pop(task))
                    yield task.result()
        finally:
            for task in running:
                task.cancel()
            if running:
                await asyncio.gather(*running, return_exceptions=True)
