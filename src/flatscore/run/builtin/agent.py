"""The built-in domains' agent and user, built from a job's recipes inside the process that
runs the episode. Loaded model backends are cached per process
(`flatscore.models.shared.get_backend`), so a worker loads each (model, arm) once."""

from __future__ import annotations

from flatscore.agents.base import Agent, make_agent
from flatscore.agents.inject import InjectAgent
from flatscore.agents.model import ModelAgent
from flatscore.agents.repair import RepairAgent
from flatscore.models.base import Backend, Sampling
from flatscore.models.shared import get_backend
from flatscore.run.jobs import AgentRecipe
from flatscore.study import SamplingSpec, UserSpec
from flatscore.users.base import User, make_user


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
