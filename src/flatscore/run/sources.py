"""Where a study's episodes come from: one source per kind of domain, each planning its own
run files and jobs and running its own jobs.

The built-in domains (`builtin_source`: flatscore's episode loop over `flatscore.domains`)
and τ²-bench run live (`tau2.source`: τ²'s own orchestrator, `tau2:<domain>` domains) are
the two registered sources. The driver, the study schema and the executors ask `SOURCES`
which source owns a domain or a job and call it; none of them knows a source's names or
prefixes. A source plugs in with `SOURCES.register`.
"""

from __future__ import annotations

import contextlib
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from flatscore.registry import Registry

if TYPE_CHECKING:
    from rich.console import Console

    from flatscore.episode import Episode
    from flatscore.run.executors.base import AgentRecipe, EpisodeJob
    from flatscore.run.study import ArmSpec, Study

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
    from flatscore.run.study import CONTROL_SEED_OFFSET

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


def _builtin() -> EpisodeSource:
    from flatscore.run.builtin_source import BuiltinSource

    return BuiltinSource()


def _tau2() -> EpisodeSource:
    from flatscore.run.tau2.source import Tau2Source

    return Tau2Source()


BUILTIN = "builtin"
SOURCES: Registry[EpisodeSource] = Registry("episode source", cached=True)
SOURCES.register(BUILTIN, _builtin)
SOURCES.register("tau2", _tau2)


def sources() -> Iterator[EpisodeSource]:
    """Every registered source, by name."""
    for name in SOURCES.names():
        yield SOURCES.make(name)


def source_of(domain: str) -> EpisodeSource | None:
    """The source that owns a domain name, or None."""
    return next((s for s in sources() if s.owns(domain)), None)


def job_source(job: EpisodeJob) -> EpisodeSource:
    """The source that planned a job."""
    return SOURCES.make(job.source)
