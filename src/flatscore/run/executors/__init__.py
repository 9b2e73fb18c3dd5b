"""Executors: where episodes run. `local` (default: asyncio in this process) or `ray`
(Ray tasks on a cluster or a local instance; needs the `ray` extra)."""

from __future__ import annotations

from flatscore.registry import Registry
from flatscore.run.executors.base import Executor, JobFeed, run_job_sync
from flatscore.run.executors.local import LocalExecutor
from flatscore.run.executors.ray import RayExecutor
from flatscore.run.jobs import AgentRecipe, EpisodeJob
from flatscore.study import ExecutorSpec


def _local(spec: ExecutorSpec, concurrency: int) -> Executor:
    return LocalExecutor(concurrency)


def _ray(spec: ExecutorSpec, concurrency: int) -> Executor:
    return RayExecutor(
        address=spec.address,
        num_cpus=spec.num_cpus,
        cpus_per_episode=spec.cpus_per_episode,
        max_in_flight=None,
        runtime_env=spec.runtime_env,
    )


EXECUTORS: Registry[Executor] = Registry("executor")
EXECUTORS.register(LocalExecutor.name, _local)
EXECUTORS.register(RayExecutor.name, _ray)


def make_executor(spec: ExecutorSpec, concurrency: int) -> Executor:
    """The executor a study asks for (Ray itself is imported only when one starts)."""
    return EXECUTORS.make(spec.kind, spec=spec, concurrency=concurrency)


__all__ = [
    "EXECUTORS",
    "AgentRecipe",
    "EpisodeJob",
    "Executor",
    "JobFeed",
    "LocalExecutor",
    "RayExecutor",
    "make_executor",
    "run_job_sync",
]
