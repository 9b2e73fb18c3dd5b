"""Where a study's episodes come from: one source per kind of domain (`EpisodeSource`,
`flatscore.run.episode_source`), each planning its own run files and jobs and running its
own jobs.

The built-in domains (`builtin`: flatscore's episode loop over `flatscore.domains`) and
τ²-bench run live (`tau2.source`: τ²'s own orchestrator, `tau2:<domain>` domains) are the two
registered sources. The driver, the study's checks and the executors ask `SOURCES` which
source owns a domain or a job and call it (`run_job`); none of them knows a source's names
or prefixes, and no source calls an executor. A source plugs in with `SOURCES.register`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from flatscore.registry import Registry
from flatscore.run.episode_source import BUILTIN, EpisodeSource

if TYPE_CHECKING:
    from flatscore.episode import Episode
    from flatscore.run.jobs import EpisodeJob


def _builtin() -> EpisodeSource:
    from flatscore.run.builtin.source import BuiltinSource

    return BuiltinSource()


def _tau2() -> EpisodeSource:
    from flatscore.run.tau2.source import Tau2Source

    return Tau2Source()


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


async def run_job(job: EpisodeJob) -> Episode:
    """Run one job to its finished episode in this process, by the source that planned it."""
    return await job_source(job).run(job)
