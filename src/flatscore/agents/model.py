"""A model-backed agent: any `Backend` (the local embedded model at a precision arm, or an
OpenAI-compatible endpoint) behind the `Agent` interface.

Greedy by default. With `temperature > 0` every turn is sampled with a seed derived from the
episode seed and the turn number, so the same (task, seed) gives the same episode and every
arm sees the same seeds. `start` drops the backend's KV caches (the local backend keeps a few
across turns of one episode; nothing carries over between episodes).

Registered names: `model` (options: `model`, `arm`, `base_url`, `temperature`, ...) and
`embedded` (the same, with the embedded model as default). Loading a local model costs
seconds, and the runner makes one agent per episode, so backends are shared per
(model, arm, endpoint) within a process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flatscore import defaults
from flatscore.agents.base import Agent, ToolSchema
from flatscore.episode import Message, Serving
from flatscore.models.base import Backend, Sampling
from flatscore.models.shared import clear_backends, get_backend
from flatscore.study import BackendSpec

if TYPE_CHECKING:
    from flatscore.domains.framework import Task

__all__ = ["ModelAgent", "clear_backends", "make_model_agent", "shared_backend"]


def turn_seed(episode_seed: int, turn: int) -> int:
    """The sampling seed of agent turn `turn` in an episode seeded `episode_seed`."""
    return episode_seed * 1000 + turn


class ModelAgent(Agent):
    """Wraps a backend: each `act` is one `generate` call; the generation's message (text,
    tool calls, or malformed raw text) is the agent's turn."""

    def __init__(
        self, backend: Backend, sampling: Sampling | None = None, name: str | None = None
    ) -> None:
        self.backend = backend
        self.sampling = sampling or Sampling(max_tokens=defaults.AGENT_MAX_TOKENS)
        self.name = name or backend.name
        self._seed = 0
        self._turn = 0

    def start(self, task: Task, seed: int) -> None:
        self._seed = seed
        self._turn = 0
        reset = getattr(self.backend, "reset", None)
        if callable(reset):
            reset()

    def serving(self) -> Serving | None:
        return self.backend.serving()

    def sampling_for_turn(self) -> Sampling:
        if self.sampling.greedy:
            return self.sampling
        return self.sampling.model_copy(update={"seed": turn_seed(self._seed, self._turn)})

    async def act(self, messages: list[Message], tools: list[ToolSchema]) -> Message:
        sampling = self.sampling_for_turn()
        self._turn += 1
        generation = await self.backend.agenerate(messages, tools, sampling)
        return generation.message.model_copy(
            update={
                "role": "assistant",
                "usage": generation.usage,
                "latency_s": generation.latency_s,
                "logprobs": generation.logprobs,
            }
        )


def shared_backend(
    model: str = "embedded",
    arm: str = "ref",
    base_url: str | None = None,
    api_key_env: str | None = "OPENAI_API_KEY",
    cache_path: str | None = None,
) -> Backend:
    """A backend shared within the process (`flatscore.models.shared`): local (`model` +
    `arm`) unless `base_url` names an OpenAI-compatible endpoint (then `model` is the served
    model's name)."""
    if base_url:
        spec = BackendSpec(
            kind="openai",
            url=base_url,
            served_model=model,
            api_key_env=api_key_env,
            cache_path=cache_path,
        )
    else:
        kind = "embedded" if model in ("embedded", "embedded-base") else "local"
        spec = BackendSpec(kind=kind, path=model, quant=arm)
    return get_backend(spec)


def make_model_agent(
    model: str = "embedded",
    arm: str = "ref",
    base_url: str | None = None,
    temperature: float = defaults.TEMPERATURE,
    top_p: float = defaults.TOP_P,
    max_tokens: int = defaults.AGENT_MAX_TOKENS,
    logprobs: bool = False,
    top_logprobs: int = 0,
    api_key_env: str | None = "OPENAI_API_KEY",
    cache_path: str | None = None,
) -> ModelAgent:
    """The registry factory (`flatscore run --agent model --agent-opt arm=int4 ...`)."""
    backend = shared_backend(model, arm, base_url, api_key_env, cache_path)
    sampling = Sampling(
        temperature=temperature,
        top_p=top_p,
        max_tokens=max_tokens,
        logprobs=logprobs,
        top_logprobs=top_logprobs,
    )
    return ModelAgent(backend, sampling)
