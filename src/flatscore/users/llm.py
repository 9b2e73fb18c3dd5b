"""The LLM user simulator: any model backend (`flatscore.models.base.Backend`) with a
τ²-style prompt and stop tokens.

The backend sees the conversation with roles flipped — the agent's turns as `user`, the
simulated user's own turns as `assistant` — after a system prompt holding the task's
instructions and the rules. Its tool calls (dual control) are turned into user-side calls.
"""

from __future__ import annotations

from collections.abc import Callable

from flatscore.agents.base import ToolSchema
from flatscore.domains.framework import Task
from flatscore.episode import Message
from flatscore.models.base import Backend, Sampling
from flatscore.users.base import OUT_OF_SCOPE, STOP, TRANSFER, User

SYSTEM_PROMPT = """You are playing a customer who talks to a customer service agent.

# Your task
{instructions}

# Rules
- Write one short message at a time, in the customer's words. Never act as the agent.
- Give only information from your task, and only when the agent asks for it. Never invent any.
- Use your tools only when the agent asks you to do something on your phone;
  then tell the agent what you saw.
- When your task is done, write {stop}. If the agent transfers you to a human,
  write {transfer}. If the agent cannot do what you need, write {out_of_scope}."""


def flip_roles(messages: list[Message]) -> list[Message]:
    """The user's view, as a chat in which the simulated user is the assistant."""
    flipped: list[Message] = []
    for m in messages:
        if m.role == "assistant":
            flipped.append(Message(role="user", content=m.content or ""))
        elif m.role == "user":
            calls = [c.model_copy(update={"requestor": "agent"}) for c in m.tool_calls]
            flipped.append(Message(role="assistant", content=m.content, tool_calls=calls))
        elif m.role == "tool":
            flipped.append(m)
    return flipped


class LLMUser(User):
    """A user simulated by a model backend."""

    name = "llm"

    def __init__(self, backend: Backend, sampling: Sampling | None = None) -> None:
        self.backend = backend
        self.sampling = sampling or Sampling()
        self._system = ""
        self._seeded = self.sampling

    def start(self, task: Task, seed: int, goal_reached: Callable[[], bool]) -> None:
        self._system = SYSTEM_PROMPT.format(
            instructions=task.scenario.instructions,
            stop=STOP,
            transfer=TRANSFER,
            out_of_scope=OUT_OF_SCOPE,
        )
        self._seeded = self.sampling.model_copy(update={"seed": seed})

    async def act(self, messages: list[Message], tools: list[ToolSchema]) -> Message:
        prompt = [Message(role="system", content=self._system), *flip_roles(messages)]
        generation = await self.backend.agenerate(prompt, tools, self._seeded)
        reply = generation.message
        calls = (
            []
            if reply.malformed
            else [c.model_copy(update={"requestor": "user"}) for c in reply.tool_calls]
        )
        return Message(role="user", content=reply.content, tool_calls=calls, usage=generation.usage)
