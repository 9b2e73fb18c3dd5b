"""The backend interface: messages + tool schemas + sampling settings -> one assistant turn.

Every backend (OpenAI-compatible endpoint, local torch model) answers with a `Generation`.
Output that is neither a message nor a parseable tool call comes back as a message marked
`malformed=True` with the raw text as content, never as an exception: it is data for the
`malformed_output` channel. Exceptions (`BackendError`) are infrastructure failures only.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from flatscore.episode import Message, Serving, TokenLogprob, TokenUsage
from flatscore.registry import Registry
from flatscore.study.backend import SamplingSpec

ToolChoice = Literal["auto", "none", "required"] | dict[str, Any]
COMPUTES: Registry[Callable[[Any], None]] = Registry(
    "compute", builtins="flatscore.models.compute", cached=True
)
"""A local model's compute settings by name (fp32, bf16, fp16): each puts a loaded model (its
precision arm applied) in that compute, in place (`flatscore.models.compute`, which imports
torch: registered on first use)."""


class Sampling(SamplingSpec):
    """Decoding settings of one request: a `SamplingSpec` and what the caller adds (the
    trial's seed, stop strings, log-probabilities, tool choice). temperature 0 is greedy; a
    seed makes sampling reproducible."""

    seed: int | None = None
    stop: tuple[str, ...] = ()
    logprobs: bool = False
    top_logprobs: int = Field(0, ge=0, le=20)
    tool_choice: ToolChoice = "auto"

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


FinishReason = Literal["stop", "length", "tool_calls"]


class Generation(BaseModel):
    """One assistant turn: the parsed message plus everything measured while producing it."""

    model_config = ConfigDict(extra="forbid")

    message: Message
    raw_text: str
    logprobs: list[TokenLogprob] | None = None
    usage: TokenUsage = Field(default_factory=TokenUsage)
    latency_s: float = 0.0
    finish_reason: FinishReason = "stop"
    cached: bool = False
    cached_tokens: int = 0  # prompt tokens served from a KV/prefix cache, not re-encoded


class BackendError(Exception):
    """An infrastructure failure (the runner records `infrastructure_error`).

    `kind`: timeout, connection, rate_limit, server_error, client_error, invalid_response,
    context_window_exceeded. `retryable` says whether the backend's retry policy applies;
    `retry_after` is the server's Retry-After header, when it sent one.
    """

    def __init__(self, message: str, *, kind: str, status: int | None = None) -> None:
        from flatscore.store.redaction import scrub  # an error body may echo the request's key

        super().__init__(scrub(message))
        self.kind = kind
        self.status = status
        self.retry_after: str | None = None

    @property
    def retryable(self) -> bool:
        return self.kind in {
            "timeout",
            "connection",
            "rate_limit",
            "server_error",
            "invalid_response",
        }


class ContextWindowExceeded(BackendError):
    def __init__(self, message: str) -> None:
        super().__init__(message, kind="context_window_exceeded")


class Backend(ABC):
    """A model backend. `generate` is the contract; `agenerate` runs it without blocking
    the event loop (backends with native async I/O override it)."""

    name: str = "backend"

    @abstractmethod
    def generate(
        self, messages: list[Message], tools: list[dict[str, Any]], sampling: Sampling
    ) -> Generation: ...

    async def agenerate(
        self, messages: list[Message], tools: list[dict[str, Any]], sampling: Sampling
    ) -> Generation:
        return await asyncio.to_thread(self.generate, messages, tools, sampling)

    def serving(self) -> Serving | None:
        """What serving this model takes in memory, when this process can see it (local
        backends); None for endpoints."""
        return None

    def close(self) -> None:  # noqa: B027  optional hook
        """Release connections or memory; the default has nothing to release."""
