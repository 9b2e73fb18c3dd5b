"""One built-in domain's job, in whatever process runs it: flatscore's episode loop with the
job's agent and user, and the episode's provenance (what played the arm)."""

from __future__ import annotations

import asyncio
from dataclasses import fields

from flatscore.domains import get_domain
from flatscore.episode import Episode
from flatscore.models.shared import get_backend
from flatscore.run.builtin.agent import build_agent, build_user
from flatscore.run.episode_loop import EpisodeSpec, run_episode
from flatscore.run.jobs import EpisodeJob

_SPEC_FROM_JOB = {f.name for f in fields(EpisodeSpec)} - {"domain", "task"}
"""What an episode's spec takes from its job as it is (trial, seed, study, arm, bounds)."""


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
