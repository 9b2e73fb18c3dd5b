"""Hand-built episodes for the analysis tests (and any test: tests/ is on the test path).
Each call is (name, outcome) where outcome is "ok", "fail" (an error with text), a channel
name (an error with that error_kind), or None (no answer)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from flatscore.episode import (
    Episode,
    ErrorBudget,
    Message,
    TerminationReason,
    ToolCall,
    ToolLists,
    ToolResult,
    make_episode_id,
)

AGENT_TOOLS = ["get_user", "get_order", "cancel_order"]
USER_TOOLS = ["toggle_airplane_mode", "check_status_bar"]

Call = tuple[str, str | None] | tuple[str, str | None, str]


def episode(
    arm: str,
    task: str,
    trial: int = 0,
    calls: Sequence[Call] = (),
    *,
    success: bool = True,
    model: str = "m",
    domain: str = "retail",
    termination: str | None = None,
    user_calls: Sequence[tuple[str, bool]] = (),
    malformed: int = 0,
    max_errors: int | None = 10,
    tools: bool = True,
    extra_args: dict[str, Any] | None = None,
) -> Episode:
    messages: list[Message] = [Message(role="user", content="hi")]
    for i, spec in enumerate(calls):
        name, outcome = spec[0], spec[1]
        text = spec[2] if len(spec) == 3 else ""  # type: ignore[misc]
        cid = f"c{i}"
        messages.append(
            Message(role="assistant", tool_calls=[ToolCall(id=cid, name=name, arguments={})])
        )
        if outcome is None:
            continue
        kind = None if outcome in ("ok", "fail") else outcome
        messages.append(
            Message(
                role="tool",
                tool_result=ToolResult(
                    call_id=cid,
                    error=outcome != "ok",
                    text=text or ("ok" if outcome == "ok" else "Error"),
                    error_kind=kind,
                ),
            )
        )
    for j, (name, failed) in enumerate(user_calls):
        cid = f"u{j}"
        messages.append(
            Message(
                role="user",
                tool_calls=[ToolCall(id=cid, name=name, arguments={}, requestor="user")],
            )
        )
        messages.append(
            Message(
                role="tool",
                tool_result=ToolResult(call_id=cid, requestor="user", error=failed, text="x"),
            )
        )
    for _ in range(malformed):
        messages.append(Message(role="assistant", content="{garbled", malformed=True))
    messages.append(Message(role="assistant", content="done"))
    reason = termination or "user_stop"
    return Episode(
        episode_id=make_episode_id("s", arm, domain, task, trial),
        study="s",
        arm=arm,
        model=model,
        domain=domain,
        task_id=task,
        trial=trial,
        messages=messages,
        termination_reason=TerminationReason(reason),
        reward=(1.0 if success else 0.0) if reason != "infrastructure_error" else None,
        error_budget=ErrorBudget(max_errors=max_errors),
        tools=ToolLists(agent=AGENT_TOOLS, user=USER_TOOLS) if tools else ToolLists(),
        **(extra_args or {}),
    )


def repaired(ep: Episode, flag_in_metadata: bool = True) -> Episode:
    """`ep` as the repair middleware logs it: a repair instruction after every failed call,
    and (unless `flag_in_metadata` is off) the repair settings in its metadata."""
    out: list[Message] = []
    for m in ep.messages:
        out.append(m)
        if m.tool_result is not None and m.tool_result.error:
            out.append(Message(role="system", content="Repair (attempt 1 of 3)", repair=True))
    meta = {"repair": {"enabled": True, "channels": ["unknown_tool"], "attempts": 3}}
    return ep.model_copy(update={"messages": out, "metadata": meta if flag_in_metadata else {}})
