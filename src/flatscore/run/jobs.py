"""What travels to wherever an episode runs: an `EpisodeJob` is plain data (pydantic,
picklable): the episode's coordinates (domain, task, trial, seed, arm, budget), recipes for
its agent and user, and the episode source that planned it (`flatscore.run.sources`) with
that source's own recipe where it has one (τ²'s orchestrator runs a τ² job:
`flatscore.run.tau2`). The source turns the recipes into objects inside the process that
runs the episode (`flatscore.run.builtin.agent`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from flatscore.episode import ErrorBudget, make_episode_id
from flatscore.study import BackendSpec, InjectSpec, RepairConfig, SamplingSpec, UserSpec


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
