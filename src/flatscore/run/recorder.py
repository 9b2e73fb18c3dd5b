"""The one writer of a run: each finished episode appended to its run file (fsynced),
counted, and shown on the progress bars (all cells, and one bar per cell). The fixed design
(`flatscore.run.driver.execute_plan`) and a sequential run (`flatscore.run.look_ahead`)
both write through it, so their run files and counts are the same kind of thing."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from types import TracebackType

from rich.console import Console
from rich.progress import TaskID

from flatscore.console import progress as make_progress
from flatscore.episode import Episode, TerminationReason
from flatscore.errors import RunFailed
from flatscore.run.jobs import EpisodeJob
from flatscore.store.jsonl import EpisodeWriter, RunCounts

OVERALL = "all cells"


class Recorder:
    """Writers for `files`, counts, and bars; `plan` adds jobs to the bars as a run learns
    of them (a sequential run: look by look)."""

    def __init__(
        self,
        files: Iterable[Path],
        cell_of: Callable[[EpisodeJob], str],
        console: Console,
        *,
        progress: bool = True,
        metadata: dict[str, object] | None = None,
    ) -> None:
        self.started = time.perf_counter()
        self.metadata = metadata or {}
        """Added to every episode's metadata (the study's analysis settings)."""
        self.writers = {str(path): EpisodeWriter(path, reruns=True) for path in files}
        self.cell_of = cell_of
        self.bar = make_progress(console, "ok {task.fields[ok]}", enabled=progress)
        self.terminations: Counter[str] = Counter()
        self.first_error: str | None = None
        self.written = 0
        self.succeeded = 0
        self.ok: dict[str, int] = defaultdict(int)
        self.bars: dict[str, TaskID] = {}

    def __enter__(self) -> Recorder:
        self.bar.__enter__()
        self.bars[OVERALL] = self.bar.add_task(OVERALL, total=0, ok=0)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        try:
            self.bar.__exit__(kind, error, trace)
        finally:
            for writer in self.writers.values():
                writer.close()

    def attempted(self, job: EpisodeJob) -> bool:
        """Whether the job's run file holds an attempt of it (a rerun after an
        infrastructure error)."""
        return job.episode_id in self.writers[job.run].attempted

    def plan(self, jobs: Iterable[EpisodeJob], finished: Collection[str] = ()) -> None:
        """Add `jobs` to the bars' totals, those whose episode id is in `finished` (already
        in the run files) as done."""
        per_cell: Counter[str] = Counter()
        done: Counter[str] = Counter()
        for job in jobs:
            per_cell[self.cell_of(job)] += 1
            done[self.cell_of(job)] += job.episode_id in finished
        for cell, n in per_cell.items():
            if cell not in self.bars:
                self.bars[cell] = self.bar.add_task(cell, total=0, ok=0)
            self._grow(self.bars[cell], n, done[cell])
        self._grow(self.bars[OVERALL], per_cell.total(), done.total())

    def _grow(self, task: TaskID, total: int, completed: int) -> None:
        current = self.bar.tasks[self.bar.task_ids.index(task)]
        self.bar.update(
            task,
            total=(current.total or 0) + total,
            completed=current.completed + completed,
        )

    def write(self, job: EpisodeJob, episode: Episode) -> None:
        episode.metadata.update(self.metadata)
        self.writers[job.run].write(episode)
        self.written += 1
        self.terminations[episode.termination_reason.value] += 1
        if self.first_error is None and episode.is_infrastructure_error:
            self.first_error = _error_of(episode.metadata)
        cell = self.cell_of(job)
        if episode.succeeded:
            self.succeeded += 1
            self.ok[cell] += 1
        self.bar.update(self.bars[cell], advance=1, ok=self.ok[cell])
        self.bar.update(self.bars[OVERALL], advance=1, ok=self.succeeded)

    def counts(self, planned: int, skipped: int, rerun: int) -> RunCounts:
        """The run's counts; every episode run ending in an infrastructure error fails it."""
        infra = self.terminations[TerminationReason.INFRASTRUCTURE_ERROR.value]
        if self.written and infra == self.written:
            raise RunFailed(
                f"all {infra} episodes run ended in an infrastructure error (kept in the run "
                f"files; fix the endpoint, then --resume); the first: {self.first_error}"
            )
        return RunCounts(
            planned=planned,
            skipped=skipped,
            written=self.written,
            succeeded=self.succeeded,
            seconds=time.perf_counter() - self.started,
            terminations=dict(self.terminations),
            rerun=rerun,
        )


def _error_of(metadata: dict[str, object]) -> str:
    """An infrastructure error's message, as the episode loop or τ²'s runner recorded it."""
    text = metadata.get("error") or metadata.get("tau2_error") or "no message recorded"
    return " ".join(str(text).split())[:500]
