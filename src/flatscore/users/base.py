"""The user-simulator interface, stop tokens and the user registry.

A **user** mirrors an agent:

    def start(self, task: Task, seed: int, goal_reached: Callable[[], bool]) -> None
    async def act(self, messages: list[Message], tools: list[ToolSchema]) -> Message

`messages` is the conversation from the user's side: the agent's text turns (`assistant`,
including malformed agent output, which is delivered as text), the user's own turns, and the
results of the user's own tool calls (dual control). `tools` are the user's tool schemas
(empty in single-control domains). `act` returns a `role="user"` message: text, or
`ToolCall`s with requestor `"user"` (the runner executes them on the user's device and calls
`act` again with the results). Text containing a stop token ends the episode (`user_stop`).
`goal_reached()` tells a scripted user whether its task is done (an LLM user judges that
itself and may ignore it).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING

from flatscore.agents.base import ToolSchema
from flatscore.episode import Message
from flatscore.registry import Registry

if TYPE_CHECKING:
    from flatscore.domains.framework import Task

STOP = "###STOP###"
TRANSFER = "###TRANSFER###"
OUT_OF_SCOPE = "###OUT-OF-SCOPE###"
STOP_TOKENS = (STOP, TRANSFER, OUT_OF_SCOPE)


def is_stop(text: str | None) -> bool:
    """Whether a user message ends the conversation (τ²'s stop tokens)."""
    return bool(text) and any(token in text for token in STOP_TOKENS)  # type: ignore[operator]


class User(ABC):
    """Base class for user simulators; see the module docstring."""

    name: str = "user"

    @abstractmethod
    def start(self, task: Task, seed: int, goal_reached: Callable[[], bool]) -> None:
        """Called once before each episode."""

    @abstractmethod
    async def act(self, messages: list[Message], tools: list[ToolSchema]) -> Message:
        """The next user message."""


UserFactory = Callable[..., User]
USERS: Registry[User] = Registry("user", builtins="flatscore.users")
"""User simulators by name; `flatscore.users` registers scripted and llm."""


register_user = USERS.register
user_names = USERS.names
make_user = USERS.make
"""`make_user(name, **options)`: a new user simulator (`KeyError` if the name is unknown)."""
