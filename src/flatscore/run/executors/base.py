"""The pluggable executor interface, and what travels to wherever an episode runs.

An executor takes `EpisodeJob`s and yields finished `Episode`s as they complete; it never
writes files. The study driver owns the run files and is the one writer, so a local run and
a Ray run produce the same JSONL, and resume works the same way for both.

An `EpisodeJob` is plain data (pydantic, picklable): the episode's coordinates (domain,
task, trial, seed, arm, budget), recipes for its agent and user, and the episode source that
planned it (`flatscore.run.sources`) with that source's own recipe where it has one (τ²'s
orchestrator runs a τ² job: `flatscore.run.tau2`).
`build_agent` / `build_user` turn recipes into objects inside the process that runs the
episode; loaded model backends are cached per process, so a worker loads each (model, arm)
once.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Callable, Iterable, Sequence
from dataclasses import fields
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from flatscore.agents.base import Agent, make_agent
from flatscore.agents.inject import InjectAgent, InjectSpec
from flatscore.agents.model import ModelAgent
from flatscore.agents.repair import RepairAgent, RepairConfig
from flatscore.domains import get_domain
from flatscore.episode import Episode, ErrorBudget, make_episode_id
from flatscore.models.base import Backend, Sampling, SamplingSpec
from flatscore.models.shared import BackendSpec, get_backend
from flatscore.run.episode_loop import EpisodeSpec, run_episode
from flatscore.run.study import UserSpec
from flatscore.users.base import User, make_user


class AgentRecipe(BaseModel):
    """How to build the agent of one arm: a model backend (+ sampling) or a registered
    agent (+ options), optionally wrapped in reflective repair. `label` becomes
    `Episode.model`, so every arm of a model lands in the same analysis cell."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str
    agent: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    backend: BackendSpec | None = None
    sampling: SamplingSpec = Field(default_factory=SamplingSpec)
    repair: RepairConfig | None = None
    checkpoint: str | None = None
    control_of: str | None = None
    """A negative control: the arm this one replicates (recorded in episode metadata)."""
    inject: InjectSpec | None = None  # planted damage on the agent's calls (inside repair)


class EpisodeJob(BaseModel):
    """One episode to run, anywhere. `run` names the run file it belongs to."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run: str
    study: str
    arm: str
    domain: str
    task_id: str
    trial: int
    seed: int
    max_steps: int
    error_budget: ErrorBudget
    timeout_s: float | None = None
    agent: AgentRecipe
    user: UserSpec
    source: str = "builtin"
    """The episode source that planned the job and runs it (`flatscore.run.sources`)."""
    recipe: BaseModel | None = None
    """The source's own recipe, where flatscore's loop does not run the episode (τ²: its
    agent and user endpoints; `agent` then only labels the episode)."""

    @property
    def episode_id(self) -> str:
        """Unique in the study: the model is part of it (two models may share arm names)."""
        arm = f"{self.agent.label}/{self.arm}"
        return make_episode_id(self.study, arm, self.domain, self.task_id, self.trial)


class JobFeed:
    """The jobs a `map` runs, which its caller may extend or withdraw from while it handles
    an episode: a sequential run adds the next look's jobs before the look is read and
    withdraws a decided arm's (`flatscore.run.look_ahead`). Jobs start in the order they
    were added (within an executor's own rules); the map ends when no job is pending or in
    flight, so whatever the caller adds while it handles the last episode still runs."""

    def __init__(self, jobs: Iterable[EpisodeJob] = ()) -> None:
        self.pending: list[EpisodeJob] = list(jobs)

    def __bool__(self) -> bool:
        return bool(self.pending)

    def add(self, jobs: Iterable[EpisodeJob]) -> None:
        self.pending.extend(jobs)

    def drop(self, withdrawn: Callable[[EpisodeJob], bool]) -> None:
        """Withdraw the pending jobs `withdrawn` names (jobs already started run on)."""
        self.pending = [job for job in self.pending if not withdrawn(job)]

    def pop(self, index: int = 0) -> EpisodeJob:
        return self.pending.pop(index)


def as_feed(jobs: Sequence[EpisodeJob] | JobFeed) -> JobFeed:
    return jobs if isinstance(jobs, JobFeed) else JobFeed(jobs)


class Executor(ABC):
    """Runs episode jobs; yields each finished episode once, in completion order."""

    name: str = "executor"

    @abstractmethod
    def map(self, jobs: Sequence[EpisodeJob] | JobFeed) -> AsyncGenerator[Episode, None]:
        """An async iterator over the finished episodes of `jobs` (any order); with a
        `JobFeed`, also of the jobs added to it before the iterator ends."""

    def close(self) -> None:  # noqa: B027  optional hook
        """Release workers or connections."""


# ---------------------------------------------------------------- building in a worker


def sampling_of(spec: SamplingSpec, seed: int) -> Sampling:
    return Sampling(**spec.model_dump(), seed=seed)


def model_agent(backend: Backend, sampling: Sampling) -> Agent:
    """The model-backed agent (`flatscore.agents.model`) over one backend."""
    return ModelAgent(backend, sampling=sampling)


def build_agent(recipe: AgentRecipe, seed: int) -> Agent:
    """A fresh agent for one episode, built from its recipe in this process."""
    agent: Agent
    if recipe.backend is None:
        assert recipe.agent is not None
        agent = make_agent(recipe.agent, **recipe.options)
    else:
        agent = model_agent(get_backend(recipe.backend), sampling_of(recipe.sampling, seed))
    if recipe.inject is not None:
        agent = InjectAgent(agent, recipe.inject)
    if recipe.repair is not None:
        agent = RepairAgent(agent, recipe.repair)
    agent.name = recipe.label
    return agent


def build_user(spec: UserSpec, seed: int) -> User:
    """The user simulator `spec.kind` names (`USERS`): one reached through a model gets its
    backend and sampling, any other its patience (`UserSpec` checks which applies)."""
    if spec.backend is None:
        return make_user(spec.kind, patience=spec.patience)
    backend = get_backend(spec.backend)
    return make_user(spec.kind, backend=backend, sampling=sampling_of(spec.sampling, seed))


_SPEC_FROM_JOB = {f.name for f in fields(EpisodeSpec)} - {"domain", "task"}
"""What an episode's spec takes from its job as it is (trial, seed, study, arm, bounds)."""


async def run_job(job: EpisodeJob) -> Episode:
    """Run one job to its finished episode in this process, by the source that planned it."""
    from flatscore.run.sources import job_source

    return await job_source(job).run(job)


async def run_builtin_job(job: EpisodeJob) -> Episode:
    """A built-in domain's job: flatscore's episode loop with the job's agent and user."""
    domain = get_domain(job.domain)
    spec = EpisodeSpec(
        domain=domain,
        task=domain.task(job.task_id),
        **{name: value for name, value in job if name in _SPEC_FROM_JOB},
    )
    # Building may load a model (seconds): keep the event loop free meanwhile.
    agent = await asyncio.to_thread(build_agent, job.agent, job.seed)
    user = await asyncio.to_thread(build_user, job.user, job.seed)
    episode = await run_episode(spec, agent, user)
    # Provenance the study label hides: which backend/weights (or agent) played the arm.
    metadata = {**episode.metadata, "played_by": job.agent.agent}
    if job.agent.backend is not None:
        backend = get_backend(job.agent.backend)
        metadata["played_by"] = backend.name
        loaded = getattr(backend, "loaded", None)  # local backends: where the weights came from
        if loaded is not None:
            metadata["weights"] = loaded.description
        if job.agent.backend.compute != "fp32":  # fp32 episodes stay as they always were
            metadata["compute"] = job.agent.backend.compute
    if job.agent.checkpoint is not None:
        metadata["checkpoint"] = job.agent.checkpoint
    if job.agent.control_of is not None:
        metadata["control_of"] = job.agent.control_of
    return episode.model_copy(update={"episode_id": job.episode_id, "metadata": metadata})


_LOOP: asyncio.AbstractEventLoop | None = None


def run_job_sync(job: EpisodeJob) -> Episode:
    """`run_job` from synchronous code (a Ray worker). One event loop per process, kept:
    cached backends may hold loop-bound state (an endpoint's semaphore)."""
    global _LOOP
    if _LOOP is None or _LOOP.is_closed():
        _LOOP = asyncio.new_event_loop()
    return _LOOP.run_until_complete(run_job(job))
