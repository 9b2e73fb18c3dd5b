"""The runner: the episode loop (`episode_loop`), the agent's and user's views (`views`), the run
defaults (`defaults`) and the quick form of `flatscore run` (`quick`, imported on its own:
it builds on the study driver, `flatscore.study_run`)."""

from __future__ import annotations

from flatscore.runner.episode_loop import GREETING, EpisodeSpec, run_episode
from flatscore.runner.views import agent_view, user_view

__all__ = [
    "GREETING",
    "EpisodeSpec",
    "agent_view",
    "run_episode",
    "user_view",
]
