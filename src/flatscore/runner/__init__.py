"""The runner: the episode loop (`episode`), run execution and resume (`run`), views."""

from __future__ import annotations

from flatscore.runner.episode import GREETING, EpisodeSpec, run_episode
from flatscore.runner.run import RunConfig, RunSummary, plan_episodes, run, run_async, trial_seed
from flatscore.runner.views import agent_view, user_view

__all__ = [
    "GREETING",
    "EpisodeSpec",
    "RunConfig",
    "RunSummary",
    "agent_view",
    "plan_episodes",
    "run",
    "run_async",
    "run_episode",
    "trial_seed",
    "user_view",
]
