"""Planted damage: an agent wrapper that perturbs another agent's tool calls at known rates,
so a study has a positive control — an arm whose amplification is known before the
analysis measures it (docs/analysis.md, "Noise floor").

Each agent tool call, independently:
- with probability `role_confusion`, its name becomes the user's same-purpose tool (the user
  tool sharing the most words with it, `same_purpose_user_tool`; in a domain without user
  tools nothing can be confused and the call is left alone);
- otherwise, with probability `drop_argument`, one of its required arguments that it passed
  is removed (a call with none is left alone);
- otherwise, with probability `wrong_value`, one of its id arguments (`W1061`, `L1073`; in
  a list, one of them) becomes another id of the same kind that the conversation has shown
  (`same_kind_ids`): the wrong order, line or item, as a model picks it, failing as a
  precondition or a missing entity (a call with no such argument, or no other id of its
  kind in view, is left alone).

The draws are seeded per episode (its seed and task id), so the same episode is perturbed
the same way in every run; what was done to which call goes into the episode's metadata
(`metadata["injected"]`, through `episode_metadata`).
"""

from __future__ import annotations

import hashlib
import random
import re
from typing import Any

from flatscore.agents.base import Agent, ToolSchema
from flatscore.domains import get_domain
from flatscore.episode import Message
from flatscore.study.agent import InjectSpec

INJECT_KINDS = ("role_confusion", "drop_argument", "wrong_value")

ID = re.compile(r"\b([A-Z]+)\d+\b")
"""An id as the built-in domains write them: capital letters, then digits."""


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


def episode_rng(seed: int, task_id: str, kind: str = "") -> random.Random:
    """The draws of one episode; `kind` names a stream of its own (`wrong_value`'s, so that
    arms without it draw exactly as before it existed)."""
    digest = hashlib.sha256(f"inject{kind}:{seed}:{task_id}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def same_kind_ids(value: str, messages: list[Message]) -> list[str]:
    """The other ids with `value`'s letters (`W1061` → orders) in the conversation's text
    and tool results, in the order they first appear."""
    kind = ID.fullmatch(value)
    if kind is None:
        return []
    seen: dict[str, None] = {}
    for m in messages:
        text = m.tool_result.text if m.tool_result is not None else m.content or ""
        for found in ID.finditer(text):
            if found.group(1) == kind.group(1) and found.group(0) != value:
                seen.setdefault(found.group(0), None)
    return list(seen)


def _wrong_value(
    arguments: dict[str, Any], messages: list[Message], rng: random.Random
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """`arguments` with one id replaced by another of its kind in view, and the change; None
    when no argument has one."""
    options = []  # (argument, index in a list or None, old id, the ids it may become)
    for name, value in arguments.items():
        values = value if isinstance(value, list) else [value]
        for i, v in enumerate(values):
            if isinstance(v, str) and (others := same_kind_ids(v, messages)):
                options.append((name, i if isinstance(value, list) else None, v, others))
    if not options:
        return None
    name, index, old, others = options[int(rng.random() * len(options))]
    new = others[int(rng.random() * len(others))]
    value = new if index is None else [*arguments[name][:index], new, *arguments[name][index + 1 :]]
    change = {"kind": "wrong_value", "argument": name, "from": old, "to": new}
    return {**arguments, name: value}, change


class InjectAgent(Agent):
    """Wraps `inner`; see the module docstring."""

    def __init__(self, inner: Agent, spec: InjectSpec) -> None:
        self.inner = inner
        self.spec = spec
        self.name = inner.name
        self.rng = random.Random(0)
        self.value_rng = random.Random(0)
        self.user_tools: list[str] = []
        self.injected: list[dict[str, Any]] = []
        self.calls = 0

    def start(self, task: Any, seed: int) -> None:
        self.inner.start(task, seed)
        self.rng = episode_rng(seed, task.id)
        self.value_rng = episode_rng(seed, task.id, "wrong_value")
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
            wrong = self.value_rng.random() < self.spec.wrong_value
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
            planted = _wrong_value(passed, messages, self.value_rng) if wrong else None
            if planted is not None:
                arguments, change = planted
                calls.append(call.model_copy(update={"arguments": arguments}))
                self.injected.append({**record, **change})
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
            **({"wrong_value": self.spec.wrong_value} if self.spec.wrong_value else {}),
            "agent_calls": self.calls,
            "changes": self.injected,
        }
        return {**self.inner.episode_metadata(), "injected": record}
