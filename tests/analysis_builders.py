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


def cell(
    task: str,
    trial: int = 0,
    *,
    study: str = "s",
    arm: str = "a",
    model: str = "m",
    domain: str = "d",
) -> dict[str, Any]:
    """The fields that name an episode (its id made from them), for `Episode(**cell(...), ...)`."""
    return {
        "episode_id": make_episode_id(study, arm, domain, task, trial),
        "study": study,
        "arm": arm,
        "model": model,
        "domain": domain,
        "task_id": task,
        "trial": trial,
    }


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
        messages += agent_call(f"c{i}", name, outcome, text or None)
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
    reason = TerminationReason(termination or "user_stop")
    return episode_of(
        cell(task, trial, arm=arm, model=model, domain=domain),
        messages,
        success=success,
        termination=reason,
        max_errors=max_errors,
        tools=ToolLists(agent=AGENT_TOOLS, user=USER_TOOLS) if tools else ToolLists(),
        **(extra_args or {}),
    )


def agent_call(
    cid: str,
    name: str,
    outcome: str | None,
    text: str | None = None,
    *,
    arguments: dict[str, Any] | str | None = None,
    say: str | None = None,
) -> list[Message]:
    """One agent call and the environment's answer: `outcome` "ok", "fail" (an error with
    no channel), a channel name (an error of that kind), or None (no answer)."""
    call = ToolCall(id=cid, name=name, arguments=arguments if arguments is not None else {})
    messages = [Message(role="assistant", content=say, tool_calls=[call])]
    if outcome is not None:
        failed = outcome != "ok"
        result = ToolResult(
            call_id=cid,
            error=failed,
            text=text or ("Error" if failed else "ok"),
            error_kind=outcome if outcome not in ("ok", "fail") else None,
        )
        messages.append(Message(role="tool", tool_result=result))
    return messages


def episode_of(
    names: dict[str, Any],
    messages: list[Message],
    *,
    success: bool,
    termination: TerminationReason,
    max_errors: int | None,
    tools: ToolLists,
    **extra: Any,
) -> Episode:
    """The episode named by `names` (a `cell`) around `messages`; an infrastructure error
    has no reward."""
    infrastructure = termination is TerminationReason.INFRASTRUCTURE_ERROR
    return Episode(
        **names,
        messages=messages,
        termination_reason=termination,
        reward=None if infrastructure else (1.0 if success else 0.0),
        error_budget=ErrorBudget(max_errors=max_errors),
        tools=tools,
        **extra,
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
