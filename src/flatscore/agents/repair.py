"""Reflective repair: a middleware that wraps any agent and, after a failed call in chosen
channels, tells the agent what failed and asks it to diagnose and re-issue the call.

The study behind flatscore found that such a prompt removes the damage where quantization
amplified a failure channel (mostly hallucinated tool names). Semantics:

- **Trigger**: the agent's last batch of tool calls (the tool results at the end of its
  view) contains a failed call whose channel (`flatscore.analysis.channels`, the same
  classification the analysis uses) is in `channels` (default `unknown_tool`, which covers
  `role_confusion`, `near_miss`, `invented` and `not_a_name`). With `malformed_output` in
  `channels`, an unparseable agent turn also triggers, on the agent's next turn.
- **Attempts**: one instruction per agent turn; consecutive failing turns form one failure
  chain, repaired at most `attempts` times (default 3). The chain ends when a turn no longer
  fails in the channels (a successful call, or a text turn); the next failure starts anew.
- **Logging**: each instruction is a `Message(role="system", repair=True)`. The runner
  drains them with `take_injected()` and appends them to the transcript just before the
  agent's reply (system messages are in neither side's view, so the user simulator never
  sees them); `episode_metadata()` gives `{"repair": {...config, "instructions": n, ...}}`
  for `Episode.metadata`. The wrapped agent sees every earlier instruction at the point it
  was given, so its view only grows (KV-cache reuse stays valid).

A study's `repair` (or the quick form's `--repair`) wraps each arm's agent in `RepairAgent`
(`flatscore.run.builtin.agent.build_agent`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from flatscore.agents.base import Agent, ToolSchema
from flatscore.analysis.channels import (
    ChannelRules,
    classify_failed_call,
    load_rules,
)
from flatscore.domains import domain_names, get_domain
from flatscore.episode import Message, Serving, ToolCall, ToolResult
from flatscore.study.agent import RepairConfig

if TYPE_CHECKING:
    from flatscore.domains.framework import Task

_HINTS = {
    "role_confusion": "that name is not one of your tools (it is a tool the customer uses on "
    "their own device: ask them to do it instead, or call one of your tools)",
    "near_miss": "that name is not one of your tools: check its exact spelling",
    "invented": "that name is not one of your tools",
    "not_a_name": "that is not a tool name: put values in the arguments, not the name",
    "bad_arguments": "the arguments do not match the tool's parameters",
    "entity_not_found": "the record you named does not exist: check the identifier",
    "precondition": "the call broke a policy rule: check the rule named in the error",
    "other": "the tool reported an error",
    "malformed_output": "your reply could not be read as a message or a tool call",
}


def parse_channels(text: str) -> list[str]:
    """'unknown_tool,bad_arguments' → the list (validated by `RepairConfig`)."""
    return [c.strip() for c in text.split(",") if c.strip()]


def _tool_names(tools: list[ToolSchema]) -> list[str]:
    names = []
    for schema in tools:
        fn = schema.get("function", schema)
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names.append(fn["name"])
    return names


def repair_instruction(
    failures: list[tuple[ToolCall | None, ToolResult | None, str]],
    valid_tools: list[str],
    attempt: int,
    attempts: int,
) -> str:
    """The text of one reflective repair instruction."""
    lines = []
    for call, result, channel in failures:
        what = f"`{call.name}`" if call is not None else "your last reply"
        error = (
            f" The error was: {result.text.strip()}" if result is not None and result.text else ""
        )
        lines.append(f"- {what} failed: {_HINTS.get(channel, 'it failed')}.{error}")
    tools = ", ".join(valid_tools) if valid_tools else "(none)"
    return (
        f"Repair (attempt {attempt} of {attempts}). Your previous action failed:\n"
        + "\n".join(lines)
        + f"\nYour valid tool names are: {tools}.\n"
        "First diagnose in one sentence what went wrong, then re-issue the corrected call "
        "using one of the valid tool names (or answer the customer if no tool is needed)."
    )


class RepairAgent(Agent):
    """Wraps `inner`; see the module docstring for when it injects an instruction."""

    def __init__(
        self,
        inner: Agent,
        config: RepairConfig | None = None,
        rules: ChannelRules | None = None,
    ) -> None:
        self.inner = inner
        self.config = config or RepairConfig()
        self.name = inner.name
        self._rules = rules or load_rules()
        self._domain = ""
        self._user_tools: frozenset[str] = frozenset()
        self._reset()

    def _reset(self) -> None:
        self._chain = 0  # instructions given in the current failure chain
        self._injected: list[tuple[int, Message]] = []  # (position in the bare view, message)
        self._pending: list[Message] = []
        self._chains = 0
        self._exhausted = 0

    def start(self, task: Task, seed: int) -> None:
        self._reset()
        self._domain = task.domain
        # A domain not in the registry has no user tool list to tell role confusion apart;
        # a registered one that fails to load is a real error and is raised.
        known = task.domain in domain_names()
        self._user_tools = frozenset(get_domain(task.domain).tool_lists().user if known else ())
        self.inner.start(task, seed)

    # ------------------------------------------------------------------ detection

    def _failures(
        self, view: list[Message], agent_tools: frozenset[str]
    ) -> list[tuple[ToolCall | None, ToolResult | None, str]]:
        """Failures in the configured channels in the agent's last turn (empty: none)."""
        tail: list[ToolResult] = []
        i = len(view) - 1
        while i >= 0 and view[i].role == "tool":
            result = view[i].tool_result
            if result is not None:
                tail.append(result)
            i -= 1
        if tail:
            calls = {c.id: c for c in view[i].tool_calls} if i >= 0 else {}
            found: list[tuple[ToolCall | None, ToolResult | None, str]] = []
            for result in reversed(tail):
                call = calls.get(result.call_id)
                if not result.error or call is None:
                    continue
                channel = classify_failed_call(
                    call,
                    result,
                    domain=self._domain,
                    agent_tools=agent_tools,
                    user_tools=self._user_tools,
                    rules=self._rules,
                )
                if self.config.matches(channel):
                    found.append((call, result, channel))
            return found
        if "malformed_output" in self.config.channels:
            last = next((m for m in reversed(view) if m.role == "assistant"), None)
            if last is not None and last.malformed:
                return [(None, None, "malformed_output")]
        return []

    # ------------------------------------------------------------------ the turn

    async def act(self, messages: list[Message], tools: list[ToolSchema]) -> Message:
        bare = [m for m in messages if not m.repair]
        names = _tool_names(tools)
        failures = self._failures(bare, frozenset(names))
        if not failures:
            self._chain = 0
        elif self._chain < self.config.attempts:
            if self._chain == 0:
                self._chains += 1
            self._chain += 1
            text = repair_instruction(failures, names, self._chain, self.config.attempts)
            message = Message(role="system", content=text, repair=True)
            self._injected.append((len(bare), message))
            self._pending.append(message)
        elif self._chain == self.config.attempts:
            self._exhausted += 1
            self._chain += 1  # count each exhausted chain once
        view = list(bare)
        for position, message in reversed(self._injected):
            view.insert(position, message)
        return await self.inner.act(view, tools)

    # ------------------------------------------------------------------ runner hooks

    def take_injected(self) -> list[Message]:
        """Instructions given since the last call, for the transcript (runner hook)."""
        out, self._pending = self._pending, []
        return out + self.inner.take_injected()

    def serving(self) -> Serving | None:
        return self.inner.serving()

    def episode_metadata(self) -> dict[str, Any]:
        """`{"repair": ...}` for `Episode.metadata`: config and counts (runner hook)."""
        return {
            **self.inner.episode_metadata(),
            "repair": {
                "enabled": True,
                "channels": list(self.config.channels),
                "attempts": self.config.attempts,
                "instructions": len(self._injected),
                "failure_chains": self._chains,
                "exhausted_chains": self._exhausted,
            },
        }


def repair_arm_label(arm: str) -> str:
    """The arm label of a repaired run: `int4` → `int4+repair` (analysis keeps them apart)."""
    return arm if arm.endswith(REPAIR_SUFFIX) else arm + REPAIR_SUFFIX


REPAIR_SUFFIX = "+repair"
