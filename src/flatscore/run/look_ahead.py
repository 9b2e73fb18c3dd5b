"""A sequential run one look ahead: the next look's jobs run while this look's last episodes
finish.

Run look by look with a barrier, each batch waits for its slowest arm: the arms' engines
finish their share of a batch at different times (an arm whose episodes run long, or end
early at the error budget), and while the last arm's episodes finish the other engines —
cores — have nothing to do. Here the jobs of look k + 1 are queued behind those of look k
for every arm still running (as if look k decided nothing; `JobFeed`), so an engine done
with look k goes on with look k + 1. Their episodes are held, not written, until look k is
read: then an arm still running gets them written, a decided arm's are discarded (and its
jobs not yet started withdrawn). The run files therefore hold exactly what the run look by
look would write, and each look reads exactly the same episodes — the tasks up to it
(`SequentialPlan.look`) — so the decisions are the same; only the order of lines in the
run files and the time differ. The price: a stop (`--time-limit`, Ctrl-C) also loses the
held episodes, and a decided arm's episodes already in flight run to their end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Callable

from flatscore.episode import Episode
from flatscore.run.executors.base import EpisodeJob, Executor, JobFeed
from flatscore.run.recorder import Recorder
from flatscore.run.sequential import SequentialPlan
from flatscore.run.sources import Prepare
from flatscore.store.jsonl import RunCounts


class LookAhead:
    """Which jobs a sequential run has queued, and what becomes of each finished episode:
    `current` are look k's jobs not yet finished, `ahead` look k + 1's (run before the look
    is read), `held` their finished episodes."""

    def __init__(self, seq: SequentialPlan, finished: set[str]) -> None:
        self.seq = seq
        self.finished = set(finished)
        self.k = 0
        self.current: dict[str, EpisodeJob] = {}
        self.ahead: dict[str, EpisodeJob] = {}
        self.held: dict[str, Episode] = {}
        self.ran_ahead = 0
        """Episodes that finished before their look's batch began (held, later written)."""
        self.discarded = 0
        """Episodes run ahead for an arm that was decided before their batch began."""

    def todo(self, k: int) -> dict[str, EpisodeJob]:
        """Look k's jobs without a result in the run files, as the arms stand now."""
        return {j.episode_id: j for j in self.seq.batch(k) if j.episode_id not in self.finished}

    def start(self) -> list[EpisodeJob]:
        """The first jobs to queue: look 0's, then look 1's."""
        self.current = self.todo(0)
        self.ahead = self._next_ahead()
        return [*self.current.values(), *self.ahead.values()]

    def _next_ahead(self) -> dict[str, EpisodeJob]:
        ahead = self.todo(self.k + 1) if self.k + 1 < self.seq.looks else {}
        return {i: j for i, j in ahead.items() if i not in self.current}

    @property
    def look_due(self) -> bool:
        """Whether every job of look k has finished and look k is still to be read."""
        return not self.current and self.k < self.seq.looks and not self.complete

    @property
    def complete(self) -> bool:
        return all(state.finished for state in self.seq.cells.values())

    def receive(self, episode: Episode) -> EpisodeJob | None:
        """The job whose episode is to be written now (None: held or discarded)."""
        key = episode.episode_id
        if key in self.current:
            self.finished.add(key)
            return self.current.pop(key)
        if key in self.ahead:
            self.held[key] = episode
            return None
        self.discarded += 1
        return None

    def advance(self) -> tuple[list[tuple[EpisodeJob, Episode]], list[EpisodeJob]]:
        """After look k has been read: the held episodes to write now (their arm still
        runs), and the jobs to queue (look k + 2's, and any of look k + 1's not queued yet);
        `wanted` then names the queued jobs still to run."""
        self.k += 1
        batch = self.todo(self.k) if self.k < self.seq.looks and not self.complete else {}
        write = [(batch.pop(key), ep) for key, ep in self.held.items() if key in batch]
        self.ran_ahead += len(write)
        self.discarded += len(self.held) - len(write)
        self.held = {}
        self.finished.update(job.episode_id for job, _ in write)
        queued = set(self.ahead)
        self.current = batch
        self.ahead = {} if self.complete else self._next_ahead()
        new = [job for key, job in self.current.items() if key not in queued]
        return write, [*new, *self.ahead.values()]

    def wanted(self, job: EpisodeJob) -> bool:
        return job.episode_id in self.current or job.episode_id in self.ahead

    @property
    def running(self) -> bool:
        """Whether any queued job is still wanted."""
        return bool(self.current or self.ahead)


async def run_looks(
    seq: SequentialPlan,
    executor: Executor,
    recorder: Recorder,
    *,
    finished: set[str],
    read_look: Callable[[int], list[str]],
    prepare: Prepare | None,
    say: Callable[[str], None],
) -> RunCounts:
    """Run `seq` look by look, one look ahead; `read_look(k)` reads look k from the run
    files and returns a line per comparison it decided."""
    ahead = LookAhead(seq, finished)
    prepared = prepare or (lambda jobs: jobs)
    first = ahead.start()
    feed = JobFeed(prepared(first) if first else [])
    rerun = sum(1 for job in first if recorder.attempted(job))
    _plan_bars(recorder, seq, 0, finished)

    async def read_due_looks() -> None:
        nonlocal rerun
        while ahead.look_due:
            for line in await asyncio.to_thread(read_look, ahead.k):
                say(line)
            write, queue = ahead.advance()
            feed.drop(lambda job: not ahead.wanted(job))
            _plan_bars(recorder, seq, ahead.k, finished)
            for job, episode in write:
                recorder.write(job, seq.annotate(job, episode))
            if queue:
                rerun += sum(1 for job in queue if recorder.attempted(job))
                feed.add(prepared(queue))

    await read_due_looks()
    if ahead.running:
        async with contextlib.aclosing(executor.map(feed)) as episodes:
            async for episode in episodes:
                job = ahead.receive(episode)
                if job is not None:
                    recorder.write(job, seq.annotate(job, episode))
                await read_due_looks()
                if not ahead.running:
                    break  # what is still in flight belongs to decided arms
    if ahead.ran_ahead or ahead.discarded:
        say(
            f"ran ahead of their look: {ahead.ran_ahead} episodes written once the look "
            f"was read, {ahead.discarded} discarded (their arm was decided first)"
        )
    skipped = sum(1 for job in seq.jobs if job.episode_id in finished)
    return recorder.counts(len(seq.jobs), skipped, rerun)


def _plan_bars(recorder: Recorder, seq: SequentialPlan, k: int, finished: set[str]) -> None:
    """Look k's batch onto the progress bars (its episodes already in the run files when
    the run began as done)."""
    if k >= seq.looks:
        return
    batch = seq.batch(k)
    recorder.plan(
        batch, done=Counter(recorder.cell_of(j) for j in batch if j.episode_id in finished)
    )
