"""`stopping: sequential`: run each comparison only until its verdict is decided.

The unit is the task. Each cell (model × domain) draws its tasks in a seeded random order
(`task_order`: the study's seed and the cell's model and domain) and runs them in batches
up to the planned looks (`SequentialDesign.looks`: every 6 paired tasks from about a quarter
of the maximum, and at the maximum, the tasks the fixed design would run:
`flatscore.analysis.sequential`). A batch holds every trial of its
tasks for every arm still open in the cell and for the reference while any arm is open
(paired, with the fixed design's seeds). After each batch the episodes of the tasks up to
that look are analysed exactly as `flatscore analyze --sequential` replays them
(`flatscore.analysis.sequential_replay`): a decided comparison's arm stops, the others go
on, and the run ends when every comparison is decided or at the maximum.

Every episode records its task's place in the order (`task_rank`), the design's maximum
(`sequential_max_tasks`) and `stopping: sequential`, so the replay reads the run in the
order it was decided, against the same boundaries. A decision at a look reads only the tasks
up to that look, never the time episodes took, so a killed and resumed run decides exactly
as an uninterrupted one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from flatscore import defaults
from flatscore.analysis.analyze import analyze
from flatscore.analysis.sequential_replay import design_for
from flatscore.analysis.settings import AnalysisSettings
from flatscore.analysis.stats import stable_rng
from flatscore.console import styled
from flatscore.episode import Episode
from flatscore.report.run_text import decided_line, state_line
from flatscore.run.jobs import EpisodeJob
from flatscore.store.jsonl import read_episodes

Cell = tuple[str, str]
"""(model, domain): the episodes' own labels."""

STOPPING = "sequential"


def cell_of(job: EpisodeJob) -> Cell:
    return job.agent.label, job.domain


def task_order(seed: int, cell: Cell, tasks: list[str]) -> list[str]:
    """The cell's tasks in the order a sequential run reads them (seeded, stable)."""
    rng = stable_rng(seed, "sequential-run", *cell)
    return [tasks[i] for i in rng.permutation(len(tasks))]


@dataclass
class CellState:
    """One cell's progress: its task order, its looks, and which arms are still open."""

    order: list[str]
    looks: list[int]
    reference: str | None = None
    open_arms: set[str] | None = None
    """None until the first look has been analysed: every arm runs."""
    decided: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Arm → (verdict, paired tasks read at the decision)."""

    @property
    def finished(self) -> bool:
        return self.open_arms is not None and not self.open_arms

    def runs(self, arm: str) -> bool:
        """Whether the arm's jobs run in the next batch (the reference while any arm is
        open)."""
        if self.open_arms is None:
            return True
        return arm in self.open_arms or (bool(self.open_arms) and arm == self.reference)


class SequentialPlan:
    """The plan's jobs in looks: `batch(k)` is what runs before look k."""

    def __init__(
        self, jobs: list[EpisodeJob], seed: int, looks: Callable[[int], list[int]]
    ) -> None:
        tasks: dict[Cell, list[str]] = defaultdict(list)
        for job in jobs:
            if job.task_id not in tasks[cell_of(job)]:
                tasks[cell_of(job)].append(job.task_id)
        self.jobs = jobs
        self.cells = {
            cell: CellState(order=task_order(seed, cell, ids), looks=looks(len(ids)))
            for cell, ids in tasks.items()
        }
        self._ranks = {
            cell: {t: i for i, t in enumerate(s.order)} for cell, s in self.cells.items()
        }

    @property
    def looks(self) -> int:
        return max(len(s.looks) for s in self.cells.values())

    def rank(self, job: EpisodeJob) -> int:
        return self._ranks[cell_of(job)][job.task_id]

    def read_up_to(self, cell: Cell, k: int) -> int:
        """Paired tasks a cell has read at its look k (its last look when it has fewer)."""
        looks = self.cells[cell].looks
        return looks[min(k, len(looks) - 1)]

    def batch(self, k: int) -> list[EpisodeJob]:
        """The jobs of the tasks between look k − 1 and look k of every unfinished cell, for
        the arms that still run, in the plan's order."""
        out = []
        for job in self.jobs:
            cell = cell_of(job)
            state = self.cells[cell]
            if k >= len(state.looks) or state.finished:
                continue
            start = state.looks[k - 1] if k > 0 else 0
            if start <= self.rank(job) < state.looks[k] and state.runs(job.arm):
                out.append(job)
        return out

    def _read_at(self, episode: Episode, k: int) -> bool:
        """Whether look k reads the episode: its task lies before the cell's look k."""
        rank = episode.metadata.get("task_rank")
        cell = (episode.model, episode.domain)
        return cell in self.cells and isinstance(rank, int) and rank < self.read_up_to(cell, k)

    def episodes_at(self, k: int, run_files: list[Path]) -> list[Episode]:
        """The episodes look k reads: the tasks before each cell's look k, whatever else the
        files hold (a resumed run's files hold later tasks too)."""
        return [
            ep
            for path in run_files
            if path.exists()
            for ep in read_episodes(path)
            if self._read_at(ep, k)
        ]

    def annotate(self, job: EpisodeJob, episode: Episode) -> Episode:
        """The episode with its place in the sequential design."""
        cell = self.cells[cell_of(job)]
        episode.metadata.update(
            stopping=STOPPING, task_rank=self.rank(job), sequential_max_tasks=cell.looks[-1]
        )
        return episode

    def look(self, k: int, run_files: list[Path], options: AnalysisSettings) -> list[str]:
        """Analyse the tasks up to look k of every cell and close the decided arms; returns
        a line per comparison decided at this look."""
        episodes = self.episodes_at(k, run_files)
        if not episodes:
            return []
        result = analyze(episodes, sequential_options(options))
        lines = []
        for cell in result.cells:
            state = self.cells.get((cell.model, cell.domain))
            if state is None or state.finished or not cell.comparisons:
                continue  # nothing to decide in a one-arm cell: it runs the whole design
            state.reference = cell.reference
            still_open = set()
            for comp in cell.comparisons:
                seq = comp.sequential
                if comp.arm in state.decided:
                    continue
                if seq is not None and seq.decided:
                    state.decided[comp.arm] = (seq.verdict, seq.tasks)
                    lines.append(
                        decided_line(
                            cell.model,
                            cell.domain,
                            comp.arm,
                            cell.reference,
                            seq.verdict,
                            seq.tasks,
                            state.looks[-1],
                        )
                    )
                elif k < len(state.looks) - 1:
                    still_open.add(comp.arm)
            state.open_arms = still_open
        return lines


def sequential_options(options: AnalysisSettings) -> AnalysisSettings:
    """The study's analysis settings for a look: sequential on, and the fewest resamples
    (the sequential tests use none; the fixed-design intervals of a look are not shown)."""
    return options.model_copy(update={"sequential": True, "bootstrap": defaults.MIN_BOOTSTRAP})


def planned_looks(options: AnalysisSettings) -> Callable[[int], list[int]]:
    """The design's looks for a cell of n tasks (`SequentialDesign.looks`)."""
    return design_for(options).looks


def report_state(plan: SequentialPlan, say: Callable[[str], None]) -> None:
    """Each comparison's state: decided (verdict at N tasks) or open."""
    for (model, domain), state in plan.cells.items():
        say(state_line(model, domain, state.decided, state.open_arms or []))


def printer(console: Console) -> Callable[[str], None]:
    return lambda line: console.print(styled(line), highlight=False, soft_wrap=True)
