"""What a τ² simulation job carries (plain data; nothing here imports τ²-bench).

A study's `tau2:<domain>` episodes are `EpisodeJob`s like every other: planned by
`flatscore.run.driver.plan_study` through the τ² source (`source`), run by the study's
executor (local or Ray), written by the one driver. The job's `recipe` (a `Tau2Recipe`)
holds what only τ² needs: where τ²'s LLM agent and user simulator send their requests,
with what sampling, and τ²'s task split. The job's own
fields are τ²'s too: `domain` is τ²'s domain name, `seed` τ²'s per-trial seed, `max_steps`
τ²'s `max_steps`, `error_budget.max_errors` τ²'s `max_errors`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from flatscore.study import Endpoint

if TYPE_CHECKING:
    from flatscore.run.jobs import EpisodeJob


class Tau2Endpoint(Endpoint):
    """An OpenAI-compatible model as litellm reaches it (`openai/<model>` at `url`, with the
    endpoint's key, timeout and retries), or a model flatscore serves itself (`serve_path`
    at `serve_quant`): the driver starts that server before the job leaves it and fills in
    `url` and `model`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str
    """What played the role, for the episode's metadata (`openai:<name>`, `serve:<path>@<q>`)."""
    url: str | None = None
    model: str | None = None
    serve_path: str | None = None
    serve_quant: str | None = None
    serve_kind: str = "local"
    """`local` (torch) or `gguf` (llama.cpp): `flatscore serve --kind`."""
    weights: str | None = None
    """What the started server says plays the model (file, format, hash), once started."""

    @classmethod
    def openai(cls, url: str, model: str, api_key_env: str | None, **limits: Any) -> Tau2Endpoint:
        """A server that is already up: `model` served at `url` (`limits`: the endpoint's
        `timeout_s`, `max_retries`)."""
        label = f"openai:{model}"
        return cls(label=label, url=url, model=model, api_key_env=api_key_env, **limits)

    @classmethod
    def serve(cls, path: str, quant: str, *, gguf: bool = False, **limits: Any) -> Tau2Endpoint:
        """A model flatscore serves itself: `path` at `quant`, by torch or (`gguf`)
        llama.cpp."""
        kind = "gguf" if gguf else "local"
        label = f"serve:gguf:{path}@{quant}" if gguf else f"serve:{path}@{quant}"
        return cls(label=label, serve_path=path, serve_quant=quant, serve_kind=kind, **limits)

    @property
    def llm(self) -> str:
        """The model as litellm names it."""
        return f"openai/{self.model}"

    def llm_args(self, sampling: dict[str, Any]) -> dict[str, Any]:
        """litellm arguments: the endpoint, the key (read at start, never stored), its
        retries and timeout, and sampling."""
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        return {
            "api_base": self.url,
            "api_key": key or "none",
            "num_retries": self.max_retries,
            "timeout": self.timeout_s,
            **sampling,
        }

    @property
    def served(self) -> bool:
        """Whether this endpoint is a server the driver must start (and has not yet)."""
        return self.url is None and self.serve_path is not None


class Tau2Recipe(BaseModel):
    """How to run one τ² simulation wherever the job lands (each endpoint with the study's
    `tau2.max_retries` and `tau2.request_timeout_s`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: Tau2Endpoint
    agent_sampling: dict[str, Any]
    user: Tau2Endpoint
    user_sampling: dict[str, Any]
    task_split: str | None
    index: int
    """The job's place in the study's τ² jobs (the episode's `source.index`)."""
    log_file: str | None = None
    """Where τ²'s own warnings go (`<output>/tau2.log`), not the terminal."""


def job_recipe(job: EpisodeJob) -> Tau2Recipe:
    """A τ² job's own recipe (the τ² source planned it)."""
    if not isinstance(job.recipe, Tau2Recipe):
        raise TypeError(f"job {job.episode_id} is not a τ² job (source {job.source!r})")
    return job.recipe
