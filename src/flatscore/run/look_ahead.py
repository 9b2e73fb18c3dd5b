"""A sequential run looks ahead: the next looks' jobs run while this look's last episodes
finish.

Run look by look with a barrier, each batch waits for its slowest arm: the arms' engines
finish their share of a batch at different times (an arm whose episodes run long, or end
early at the error budget), and while the last arm's episodes finish the other engines —
cores — have nothing to do. Here the jobs of the next `LOOKS_AHEAD` looks are queued behind
those of look k for every arm still running (as if look k decided nothing; `JobFeed`), so an
engine done with look k goes on with the next. Their episodes are held, not written, until
their look's batch begins: then an arm still running gets them written, a decided arm's are
discarded (and its jobs not yet started withdrawn). The run files therefore hold exactly
what the run look by look would write, and each look reads exactly the same episodes — the
tasks up to it (`SequentialPlan.look`) — so the decisions are the same; only the order of
lines in the run files and the time differ. Held episodes are kept on disk too
(`held_file`), so a stopped run's are put back when it resumes. The price: a decided arm's
episodes run ahead are discarded — at most `LOOKS_AHEAD` looks' worth.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

from flatscore.episode import Episode
from flatscore.report.run_text import ran_ahead_line
from flatscore.run.episode_source import Prepare
from flatscore.run.executors.base import Executor, JobFeed
from flatscore.run.jobs import EpisodeJob
from flatscore.run.recorder import Recorder
from flatscore.run.sequential import SequentialPlan
from flatscore.store.jsonl import (
    EpisodeWriter,
    OutputLock,
    RunCounts,
    episode_lines,
    held_file,
    read_episodes,
    replace_whole,
)

LOOKS_AHEAD = 2
"""How many looks' jobs run ahead of the look being waited for. One is not enough where an
arm is much slower than the others (study v3's int4-awq ran half as many episodes as the
other arms in the same time): the others finish the next look too and wait again; two keep
them busy through one more look, and bound the work a decision discards to two looks."""


class LookAhead:
    """Which jobs a sequential run has queued, and what becomes of each finished episode:
    `current` are look k's jobs not yet finished, `ahead` those of the `depth` looks after
    it (run before their look's batch begins), `held` their finished episodes. `stash`:
    episodes a stopped run had held (`held_file`), put back where their job comes up
    instead of being run again."""

    def __init__(
        self,
        seq: SequentialPlan,
        finished: set[str],
        stash: dict[str, Episode] | None = None,
        depth: int = LOOKS_AHEAD,
    ) -> None:
        self.seq = seq
        self.depth = depth
        self.finished = set(finished)
        self.stash = {k: ep for k, ep in (stash or {}).items() if k not in self.finished}
        self.k = 0
        self.current: dict[str, EpisodeJob] = {}
        self.ahead: dict[str, EpisodeJob] = {}
        self.held: dict[str, Episode] = {}
        self.ran_ahead = 0
        """Episodes that finished before their look's batch began (held, later written)."""
        self.discarded = 0
        """Episodes run ahead for an arm that was decided before their batch began."""
        self.restored = 0
        """Episodes of the stash put back."""

    def todo(self, k: int) -> dict[str, EpisodeJob]:
        """Look k's jobs without a result in the run files, as the arms stand now."""
        return {j.episode_id: j for j in self.seq.batch(k) if j.episode_id not in self.finished}

    def start(self) -> tuple[list[tuple[EpisodeJob, Episode]], list[EpisodeJob]]:
        """Stashed episodes of look 0 to write now, and the first jobs to queue: look 0's,
        then those of the looks ahead."""
        self.current = self.todo(0)
        self.ahead = self._next_ahead()
        write = self._restore()
        return write, self._queue([*self.current.values(), *self.ahead.values()])

    def _next_ahead(self) -> dict[str, EpisodeJob]:
        ahead: dict[str, EpisodeJob] = {}
        for k in range(self.k + 1, min(self.k + 1 + self.depth, self.seq.looks)):
            ahead.update(self.todo(k))
        return {i: j for i, j in ahead.items() if i not in self.current}

    def _restore(self) -> list[tuple[EpisodeJob, Episode]]:
        """Stashed episodes of this look's jobs (to write now) and of the next look's (held
        again)."""
        write = []
        for key in [k for k in self.stash if k in self.current or k in self.ahead]:
            episode = self.stash.pop(key)
            self.restored += 1
            if key in self.current:
                write.append((self.current.pop(key), episode))
                self.finished.add(key)
            else:
                self.held[key] = episode
        return write

    def _queue(self, jobs: list[EpisodeJob]) -> list[EpisodeJob]:
        return [job for job in jobs if self.wanted(job) and job.episode_id not in self.held]

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
        """After look k has been read: the held episodes to write now (look k + 1's, their
        arm still running), and the jobs to queue (the newest look ahead's, and any not
        queued yet); `wanted` then names the queued jobs still to run."""
        self.k += 1
        batch = self.todo(self.k) if self.k < self.seq.looks and not self.complete else {}
        write = [(batch.pop(key), ep) for key, ep in self.held.items() if key in batch]
        self.ran_ahead += len(write)
        self.finished.update(job.episode_id for job, _ in write)
        queued = set(self.ahead)
        self.current = batch
        self.ahead = {} if self.complete else self._next_ahead()
        still = {key: ep for key, ep in self.held.items() if key in self.ahead}
        self.discarded += len(self.held) - len(write) - len(still)
        self.held = still
        write += self._restore()
        jobs = {**self.current, **self.ahead}
        return write, self._queue([job for key, job in jobs.items() if key not in queued])

    def still_held(self) -> set[str]:
        """Ids of the held and stashed episodes that may still be written: their arm is
        open at a look not yet read. The rest were discarded."""
        later = set()
        if not self.complete:
            later = {j.episode_id for k in range(self.k, self.seq.looks) for j in self.seq.batch(k)}
        return set(self.held) | (set(self.stash) & later)

    def wanted(self, job: EpisodeJob) -> bool:
        return job.episode_id in self.current or job.episode_id in self.ahead

    @property
    def running(self) -> bool:
        """Whether any queued job is still wanted."""
        return bool(self.current or self.ahead)


class HeldFiles:
    """The `held_file` of every run file: read back into a stash when a run starts, appended
    to as episodes are held, pruned of those discarded after each look, removed when the run
    is complete."""

    def __init__(self, runs: list[Path]) -> None:
        self.paths = {str(run): held_file(run) for run in runs}
        self.writers: dict[str, EpisodeWriter] = {}

    def stash(self) -> dict[str, Episode]:
        return {
            ep.episode_id: ep
            for path in self.paths.values()
            if path.exists()
            for ep in read_episodes(path)
        }

    def keep(self, job: EpisodeJob, episode: Episode) -> None:
        run = str(Path(job.run))
        if run not in self.writers:
            self.writers[run] = EpisodeWriter(self.paths[run])
        self.writers[run].write(episode)

    def prune(self, keep: set[str]) -> None:
        """Rewrite each file with only the episodes in `keep`: those of an arm decided
        since they were held are dropped, so the files (and the archive's side files)
        hold only what a resumed run may still write."""
        for run, path in self.paths.items():
            if not path.exists():
                continue
            lines = list(episode_lines(path))
            kept = [line for ep, line in lines if ep.episode_id in keep]
            if len(kept) == len(lines):
                continue
            writer = self.writers.pop(run, None)
            if writer is not None:
                writer.close()
            lock = OutputLock(path)
            lock.acquire()
            try:
                if not kept:
                    path.unlink()
                    continue
                replace_whole(path, "".join(line + "\n" for line in kept).encode())
            finally:
                lock.release()

    def close(self) -> None:
        for writer in self.writers.values():
            writer.close()
        self.writers = {}

    def remove(self) -> None:
        self.close()
        for path in self.paths.values():
            path.unlink(missing_ok=True)


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
    """Run `seq` look by look, `LOOKS_AHEAD` ahead; `read_look(k)` reads look k from the run
    files and returns a line per comparison it decided. Held episodes are also kept in
    `HeldFiles`, so a stopped run's come back when it resumes."""
    held_files = HeldFiles(sorted({Path(j.run) for j in seq.jobs}))
    ahead = LookAhead(seq, finished, held_files.stash())
    prepared = prepare or (lambda jobs: jobs)
    rerun = 0
    feed = JobFeed()

    def queue(write: list[tuple[EpisodeJob, Episode]], more: list[EpisodeJob]) -> None:
        nonlocal rerun
        for job, episode in write:
            recorder.write(job, seq.annotate(job, episode))
        if more:
            rerun += sum(1 for job in more if recorder.attempted(job))
            feed.add(prepared(more))

    async def read_due_looks() -> None:
        while ahead.look_due:
            for line in await asyncio.to_thread(read_look, ahead.k):
                say(line)
            write, more = ahead.advance()
            feed.drop(lambda job: not ahead.wanted(job))
            held_files.prune(ahead.still_held())
            _plan_bars(recorder, seq, ahead.k, finished)
            queue(write, more)

    try:
        _plan_bars(recorder, seq, 0, finished)
        queue(*ahead.start())
        await read_due_looks()
        if ahead.running:
            async with contextlib.aclosing(executor.map(feed)) as episodes:
                async for episode in episodes:
                    job = ahead.receive(episode)
                    if job is not None:
                        recorder.write(job, seq.annotate(job, episode))
                    elif episode.episode_id in ahead.held:
                        held_files.keep(ahead.ahead[episode.episode_id], episode)
                    await read_due_looks()
                    if not ahead.running:
                        break  # what is still in flight belongs to decided arms
    finally:
        held_files.close()
        if ahead.ran_ahead or ahead.discarded or ahead.restored or ahead.held:
            say(ran_ahead_line(ahead.ran_ahead, ahead.discarded, ahead.restored, len(ahead.held)))
    held_files.remove()
    skipped = sum(1 for job in seq.jobs if job.episode_id in finished)
    return recorder.counts(len(seq.jobs), skipped, rerun)


def _plan_bars(recorder: Recorder, seq: SequentialPlan, k: int, finished: set[str]) -> None:
    """Look k's batch onto the progress bars (its episodes already in the run files when
    the run began as done)."""
    if k >= seq.looks:
        return
    recorder.plan(seq.batch(k), finished)
