"""The do-nothing agent: never calls a tool. Every task that needs a write fails with it."""

from __future__ import annotations

from flatscore.agents.base import Agent, ToolSchema
from flatscore.episode import Message

REPLY = "I'm sorry, I can't help with that."


class NoopAgent(Agent):
    name = "noop"

    async def act(self, messages: list[Message], tools: list[ToolSchema]) -> Message:
        return Message(role="assistant", content=REPLY)
