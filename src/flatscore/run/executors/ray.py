"""The Ray executor: each episode is a Ray task, on a cluster (`ray://head:10001`, `auto`)
or on a local instance started here (`num_cpus` workers).

Only data crosses the wire: the job goes out as JSON and the finished episode comes back as
JSON, to the driver, which alone writes the run files (once per episode, fsynced), so resume
and the files are the same as with the local executor. Workers build agents from the job's
recipe and cache loaded backends per worker process, so each worker loads a (model, arm)
once. Workers need flatscore installed (a local instance shares this environment; for a
cluster, install it on the nodes or pass `runtime_env`). Model serving at scale is not
Ray's job here: point endpoint arms at vLLM (docs/studies.md).

`ray` itself is imported inside the methods: it is the optional `ray` extra, and heavy.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import AsyncGenerator, Sequence
from typing import Any

from flatscore.episode import Episode
from flatscore.errors import InputError
from flatscore.run.executors.base import Executor, JobFeed, as_feed, run_job_sync
from flatscore.run.jobs import EpisodeJob
from flatscore.run.time_limit import RunStopped, draining


def _run_remote(job_json: str) -> str:
    """The body of one Ray task (runs in a worker process)."""
    job = EpisodeJob.model_validate_json(job_json)
    return run_job_sync(job).model_dump_json()


def ray_available() -> bool:
    return importlib.util.find_spec("ray") is not None


class RayExecutor(Executor):
    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        num_cpus: int | None = None,
        cpus_per_episode: float = 1.0,
        max_in_flight: int | None = None,
        runtime_env: dict[str, Any] | None = None,
    ) -> None:
        if not ray_available():
            raise InputError(
                "the ray executor needs Ray: pip install 'flatscore[ray]'", field="executor"
            )
        self.address = address or None
        self.num_cpus = num_cpus
        self.cpus_per_episode = cpus_per_episode
        self.max_in_flight = max_in_flight
        self.runtime_env = runtime_env
        self._started_here = False

    def _init(self) -> None:
        import ray

        if ray.is_initialized():
            return
        kwargs: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "configure_logging": False,
        }
        if self.address:
            kwargs["address"] = self.address
        else:
            kwargs["num_cpus"] = self.num_cpus
        if self.runtime_env:
            kwargs["runtime_env"] = self.runtime_env
        try:
            ray.init(**kwargs)
        except ConnectionError as exc:
            raise InputError(
                f"cannot reach Ray at {self.address}: {exc}", field="executor"
            ) from None
        self._started_here = True

    def _window(self) -> int:
        """Tasks submitted at once: enough to keep every CPU busy, few enough that results
        stream back to the writer steadily."""
        if self.max_in_flight is not None:
            return self.max_in_flight
        import ray

        cpus = float(ray.cluster_resources().get("CPU", 1.0))
        return max(1, int(2 * cpus / self.cpus_per_episode))

    async def map(self, jobs: Sequence[EpisodeJob] | JobFeed) -> AsyncGenerator[Episode, None]:
        import ray

        self._init()  # in the main thread: Ray installs signal handlers there
        remote = ray.remote(num_cpus=self.cpus_per_episode, max_retries=0)(_run_remote)
        feed = as_feed(jobs)
        window = self._window()
        pending: list[Any] = []
        try:
            while feed or pending:
                while feed and len(pending) < window and not draining():
                    pending.append(remote.remote(feed.pop().model_dump_json()))
                if not pending:
                    raise RunStopped("the time limit was reached with episodes left to run")
                ready, pending = await asyncio.to_thread(ray.wait, pending, num_returns=1)
                for ref in ready:
                    text = await asyncio.to_thread(ray.get, ref)
                    yield Episode.model_validate_json(text)
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)

    def close(self) -> None:
        import ray

        if self._started_here and ray.is_initialized():
            ray.shutdown()
        self._started_here = False
