"""The default executor: episodes as asyncio tasks in this process, `concurrency` at once.

`concurrency` is the number of episodes in flight. Endpoint agents overlap their HTTP
waits. In-process models (`LocalBackend.agenerate`) hand each turn to their arm's batch
engine without holding a thread: the episodes in flight of one arm share every forward pass
(continuous batching), and each arm's engine runs on its own thread, so the arms decode side
by side on the cores. Threads for a 2-core machine: one torch thread per arm
(`ModelSpec.threads`, default 1) — OpenMP threads of several arms busy-wait against each
other, while two or more arms already keep both cores busy.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from flatscore.episode import Episode
from flatscore.executors.base import EpisodeJob, Executor, run_job


class LocalExecutor(Executor):
    name = "local"

    def __init__(self, concurrency: int = 2) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be ≥ 1")
        self.concurrency = concurrency

    async def map(self, jobs: Sequence[EpisodeJob]) -> AsyncIterator[Episode]:
        """Start up to `concurrency` jobs; yield each episode as soon as it finishes."""
        pending_jobs = list(jobs)[::-1]  # pop() takes them in the given (paired) order
        running: set[asyncio.Task[Episode]] = set()
        try:
            while pending_jobs or running:
                while pending_jobs and len(running) < self.concurrency:
                    running.add(asyncio.create_task(run_job(pending_jobs.pop())))
                done, running = await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                for task in sorted(done, key=id):
                    yield task.result()
        finally:
            for task in running:
                task.cancel()
            if running:
                await asyncio.gather(*running, return_exceptions=True)
