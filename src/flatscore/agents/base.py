"""The agent interface and the agent registry.

An **agent** is anything with

    def start(self, task: Task, seed: int) -> None            # per-episode reset hook
    async def act(self, messages: list[Message], tools: list[ToolSchema]) -> Message

`messages` is the conversation from the agent's point of view: a `system` message with the
domain policy, then user turns (text only), the agent's own turns and the results of its own
tool calls (`role="tool"`). `tools` are the agent's OpenAI function schemas. `act` returns the
next assistant `Message`: text and/or `ToolCall`s (requestor `"agent"`). When a model's output
cannot be parsed, return `Message(role="assistant", content=<raw text>, malformed=True)`: the
runner delivers it to the user as text; it never reaches the environment and is not a failed
call. CPU-bound agents should run their work in a thread (`asyncio.to_thread`) so endpoint
agents can run concurrently. `name` labels the episodes (`Episode.model`). Two optional
hooks serve middleware (repair): `take_injected()` and `episode_metadata()`.

A **backend** (`flatscore.models.base.Backend`: `generate(messages, tools, sampling) ->
Generation`, `agenerate` for async) is the smaller thing a model provides; a model agent wraps
one, and the LLM user simulator uses the same interface. A `BackendError` raised from `act`
is recorded as `infrastructure_error` (`ContextWindowExceeded` as `context_window_exceeded`);
any other exception as `agent_error`.

Agents are created by name through a registry (`register_agent`, `make_agent`), one instance
per episode, so a model agent can be plugged in without touching the runner or the CLI.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flatscore.episode import Message, Serving
from flatscore.registry import Registry

if TYPE_CHECKING:
    from flatscore.domains.framework import Task

ToolSchema = dict[str, Any]


class Agent(ABC):
    """Base class for agents; see the module docstring for the contract."""

    name: str = "agent"

    def start(self, task: Task, seed: int) -> None:  # noqa: B027  optional hook
        """Called once before each episode (reset per-episode state here)."""

    @abstractmethod
    async def act(self, messages: list[Message], tools: list[ToolSchema]) -> Message:
        """The next assistant message."""

    def take_injected(self) -> list[Message]:
        """Messages the agent added to its own context during the last `act` (middleware such
        as repair: `role="system"`, `repair=True`). The runner logs them just before the
        agent's reply; neither view shows them back (the agent keeps its own copy)."""
        return []

    def episode_metadata(self) -> dict[str, Any]:
        """Extra `Episode.metadata` entries, read once the episode ends."""
        return {}

    def serving(self) -> Serving | None:
        """What serving the agent's model takes (`Episode.serving`), read once the episode
        ends; None when there is no model or it runs elsewhere."""
        return None


AgentFactory = Callable[..., Agent]
AGENTS: Registry[Agent] = Registry("agent", builtins="flatscore.agents")
"""Agents by name; `flatscore.agents` registers oracle, noop and the model agents."""


register_agent = AGENTS.register
"""`register_agent(name, factory)`: `make_agent(name, **options)` calls `factory(**options)`."""
agent_names = AGENTS.names
make_agent = AGENTS.make
"""`make_agent(name, **options)`: a new agent (`KeyError` naming the known ones if unknown)."""
