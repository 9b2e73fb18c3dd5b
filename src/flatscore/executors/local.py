"""The default executor: episodes as asyncio tasks in this process, `concurrency` at once.

Endpoint agents overlap their HTTP waits; in-process models run their generation in a
worker thread (`Backend.agenerate`), one torch thread each, so different arms decode in
parallel on different cores (one backend serves one episode at a time: it holds a lock).
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
