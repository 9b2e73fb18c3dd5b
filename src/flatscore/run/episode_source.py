"""What an episode source is: a kind of domain that plans its own run files and jobs and
runs its own jobs (`EpisodeSource`), with what every source shares (run files named alike,
paired trial seeds). The registered sources are in `flatscore.run.sources`; a source imports
this module and the job data (`flatscore.run.jobs`), never an executor."""

from __future__ import annotations

import contextlib
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from flatscore.run.jobs import AgentRecipe, EpisodeJob
from flatscore.study import CONTROL_SEED_OFFSET, ArmSpec, Study

if TYPE_CHECKING:
    from rich.console import Console

    from flatscore.episode import Episode

BUILTIN = "builtin"
"""The built-in domains' source (`flatscore.run.builtin`): a job's default source."""

Prepare = Callable[[list["EpisodeJob"]], list["EpisodeJob"]]
"""Sees the jobs about to run before the executor does (τ²: start the servers they need)."""


@dataclass(frozen=True)
class ArmRun:
    """One run file: a model in one arm (repaired or not) of one source's domains."""

    model: str
    arm: str
    path: Path
    recipe: AgentRecipe
    seed: int
    """Seed of trial 0: the study's, or a control arm's own seed base."""


def safe_name(name: str) -> str:
    """A file-name-safe form of a model or arm label."""
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", name)


def trial_seed(base_seed: int, trial: int) -> int:
    """The seed of trial `trial`: the same for every task and every arm."""
    return base_seed + trial


def seed_base(study: Study, arm: ArmSpec) -> int:
    """The seed of an arm's trial 0: the study's, or a control arm's own base (default: the
    study's + `CONTROL_SEED_OFFSET`), in every source alike."""
    if arm.control_of is None:
        return study.seed
    return arm.seed_base if arm.seed_base is not None else study.seed + CONTROL_SEED_OFFSET


class EpisodeSource(ABC):
    """A kind of domain: which names it owns, what a study using it must satisfy, its run
    files and jobs, and how one of its jobs becomes an episode."""

    name: str
    plants_damage: bool = True
    """Whether `inject` arms reach its episodes (flatscore's own loop applies them)."""

    @abstractmethod
    def owns(self, domain: str) -> bool:
        """Whether a study's domain name is one of this source's."""

    def check_domains(self, domains: list[str]) -> None:  # noqa: B027  optional hook
        """Raise ValueError for a study's domain list this source cannot run (all the
        study's domains, of every source)."""

    def check_study(self, study: Study) -> None:  # noqa: B027  optional hook
        """Raise ValueError for a study that uses this source but lacks what it needs."""

    @abstractmethod
    def runs(self, study: Study, runs_dir: Path, run_file: Path | None) -> list[ArmRun]:
        """One run file per (model, arm) for this source's domains (`run_file`: the quick
        form's one file)."""

    @abstractmethod
    def jobs(self, study: Study, domain: str, runs: list[ArmRun], first: int) -> list[EpisodeJob]:
        """The jobs of one of its domains, paired across `runs`; `first` counts the jobs this
        source planned for earlier domains."""

    def session(
        self, study: Study, console: Console | None
    ) -> contextlib.AbstractContextManager[Prepare | None]:
        """What must be up while its jobs run (servers), around one run of a plan."""
        return contextlib.nullcontext(None)

    @abstractmethod
    async def run(self, job: EpisodeJob) -> Episode:
        """Run one of its jobs to its finished episode in this process."""
