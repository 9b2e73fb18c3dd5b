"""The servers a study's `server:` arms name, around one run of its plan.

`start` brings up one server per arm that has episodes left to run (before any episode
starts, so a server that cannot start stops the run with nothing written); `prepare` gives
each job's backend its server's URL and what the server was (`ServedBy`: version, command
line, log), which the episodes record. On exit every server is stopped: at the end, on an
error, on Ctrl-C and at a time limit. Logs: `<output>/server-logs/<model>_<arm>.log`,
appended to by every run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from flatscore.models.servers import ServerPool

if TYPE_CHECKING:
    from rich.console import Console

    from flatscore.run.jobs import EpisodeJob
    from flatscore.study import BackendSpec

LOG_DIR = "server-logs"


def needs_server(job: EpisodeJob) -> bool:
    """Whether the job's agent or user is played by a server flatscore starts."""
    return any(
        spec is not None and spec.server is not None and spec.url is None
        for spec in (job.agent.backend, job.user.backend)
    )


class StudyServers:
    """Starts the servers of the jobs about to run, fills their URLs in, stops them on exit."""

    def __init__(self, out_dir: Path, console: Console | None = None) -> None:
        from flatscore.report.server_text import say_starting

        on_start = say_starting(console)
        self.pool = ServerPool(log_dir=out_dir / LOG_DIR, on_start=on_start)

    def _resolved(self, spec: BackendSpec | None, arm: str) -> BackendSpec | None:
        if spec is None or spec.server is None or spec.url is not None:
            return spec
        served = self.pool.start(arm, spec.server, spec.served_model or arm)
        return spec.model_copy(update={"url": served.url, "served_by": served})

    def start(self, jobs: list[EpisodeJob]) -> None:
        """Start (once each) the servers these jobs need, one after the other."""
        self.prepare(jobs)

    def prepare(self, jobs: list[EpisodeJob]) -> list[EpisodeJob]:
        """The jobs with their servers' URLs (starting any server not yet up)."""
        out = []
        for job in jobs:
            if needs_server(job):
                arm = f"{job.agent.label}/{job.arm}"
                agent = job.agent.model_copy(
                    update={"backend": self._resolved(job.agent.backend, arm)}
                )
                user = job.user.model_copy(
                    update={"backend": self._resolved(job.user.backend, f"{arm}/user")}
                )
                job = job.model_copy(update={"agent": agent, "user": user})
            out.append(job)
        return out

    def __enter__(self) -> StudyServers:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.pool.close()
