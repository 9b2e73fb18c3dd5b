"""Planted damage: an agent wrapper that perturbs another agent's tool calls at known rates,
so a study has a positive control — an arm whose amplification is known before the
analysis measures it (docs/analysis.md, "Noise floor").

Each agent tool call, independently:
- with probability `role_confusion`, its name becomes the user's same-purpose tool (the user
  tool sharing the most words with it, `same_purpose_user_tool`; in a domain without user
  tools nothing can be confused and the call is left alone);
- otherwise, with probability `drop_argument`, one of its required arguments that it passed
  is removed (a call with none is left alone).

The draws are seeded per episode (its seed and task id), so the same episode is perturbed
the same way in every run; what was done to which call goes into the episode's metadata
(`metadata["injected"]`, through `episode_metadata`).
"""

from __future__ import annotations

import hashlib
import random
import re
from typing import Any

from pydantic import Field

from flatscore.agents.base import Agent, ToolSchema
from flatscore.domains import get_domain
from flatscore.episode import Message
from flatscore.strict import StrictModel

INJECT_KINDS = ("role_confusion", "drop_argument")


class InjectRates(StrictModel):
    """How often each kind of damage is planted in an agent tool call."""

    role_confusion: float = Field(0.0, ge=0.0, le=1.0)
    drop_argument: float = Field(0.0, ge=0.0, le=1.0)


class InjectSpec(InjectRates):
    """A planted-damage arm: `base` (another arm of the same model) perturbed at run time."""

    base: str = Field(min_length=1)


def _words(name: str) -> set[str]:
    return {w for w in re.split(r"[^a-z0-9]+", name.lower()) if w}


def same_purpose_user_tool(name: str, user_tools: list[str]) -> str | None:
    """The user tool sharing the most name words with agent tool `name` (`enable_roaming`
    → `set_data_roaming`); with none in common, the first user tool (any user tool is a
    role confusion); None without user tools."""
    if not user_tools:
        return None
    words = _words(name)
    return max(user_tools, key=lambda tool: len(words & _words(tool)))


def _required(tools: list[ToolSchema], name: str) -> list[str]:
    for tool in tools:
        function = tool.get("function", tool)
        if function.get("name") == name:
            return list((function.get("parameters") or {}).get("required") or [])
    return []


def episode_rng(seed: int, task_id: str) -> random.Random:
    digest = hashlib.sha256(f"inject:{seed}:{task_id}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


class InjectAgent(Agent):
    """Wraps `inner`; see the module docstring."""

    def __init__(self, inner: Agent, spec: InjectSpec) -> None:
        self.inner = inner
        self.spec = spec
        self.name = inner.name
        self.rng = random.Random(0)
        self.user_tools: list[str] = []
        self.injected: list[dict[str, Any]] = []
        self.calls = 0

    def start(self, task: Any, seed: int) -> None:
        self.inner.start(task, seed)
        self.rng = episode_rng(seed, task.id)
        domain = get_domain(task.domain)
        self.user_tools = domain.user_toolkit.tool_names() if domain.user_toolkit else []
        self.injected = []
        self.calls = 0

    async def act(self, messages: list[Message], tools: list[ToolSchema]) -> Message:
        message = await self.inner.act(messages, tools)
        if not message.tool_calls:
            return message
        calls = []
        for call in message.tool_calls:
            self.calls += 1
            # Both draws happen for every call, so one rate does not shift the other's draws.
            confuse = self.rng.random() < self.spec.role_confusion
            drop = self.rng.random() < self.spec.drop_argument
            pick = self.rng.random()
            target = same_purpose_user_tool(call.name, self.user_tools)
            record: dict[str, Any] = {"call_id": call.id, "name": call.name}
            if confuse and target is not None:
                calls.append(call.model_copy(update={"name": target}))
                self.injected.append({**record, "kind": "role_confusion", "to": target})
                continue
            passed = call.arguments if isinstance(call.arguments, dict) else {}
            present = [a for a in _required(tools, call.name) if a in passed]
            if drop and present:
                dropped = present[int(pick * len(present))]
                arguments = {k: v for k, v in passed.items() if k != dropped}
                calls.append(call.model_copy(update={"arguments": arguments}))
                self.injected.append({**record, "kind": "drop_argument", "argument": dropped})
                continue
            calls.append(call)
        return message.model_copy(update={"tool_calls": calls})

    def take_injected(self) -> list[Message]:
        return self.inner.take_injected()

    def episode_metadata(self) -> dict[str, Any]:
        """The inner agent's entries, plus `injected`: the rates, the calls seen and each
        change made (call id, original name, kind, new name or dropped argument)."""
        record = {
            "base": self.spec.base,
            "role_confusion": self.spec.role_confusion,
            "drop_argument": self.spec.drop_argument,
            "agent_calls": self.calls,
            "changes": self.injected,
        }
        return {**self.inner.episode_metadata(), "injected": record}
