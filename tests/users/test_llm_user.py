"""The LLM user's simulator logic, with a deterministic in-process backend (not a model)."""

from __future__ import annotations

import asyncio
from typing import Any

from flatscore.domains import get_domain
from flatscore.episode import Message, ToolCall, ToolResult
from flatscore.models.base import Backend, Generation, Sampling
from flatscore.users import STOP, LLMUser


class Echo(Backend):
    """Records what it was given; answers with a fixed message."""

    def __init__(self, reply: Message) -> None:
        self.reply = reply
        self.seen: list[tuple[list[Message], list[dict[str, Any]], Sampling]] = []

    def generate(
        self, messages: list[Message], tools: list[dict[str, Any]], sampling: Sampling
    ) -> Generation:
        self.seen.append((messages, tools, sampling))
        return Generation(message=self.reply, raw_text=self.reply.content or "")


def test_prompt_flips_roles_and_carries_the_instructions() -> None:
    task = get_domain("telecom").task("airplane_00")
    backend = Echo(Message(role="assistant", content="My phone has no service."))
    user = LLMUser(backend)
    user.start(task, 301, lambda: False)
    history = [
        Message(role="assistant", content="Hi! How can I help you today?"),
        Message(role="user", content="No service."),
        Message(role="assistant", content="Please check the status bar on your phone."),
        Message(
            role="user",
            tool_calls=[ToolCall(id="u1", name="check_status", arguments={}, requestor="user")],
        ),
        Message(role="tool", tool_result=ToolResult(call_id="u1", requestor="user", text="ok")),
    ]
    tools = get_domain("telecom").user_tool_schemas()
    reply = asyncio.run(user.act(history, tools))
    assert reply.role == "user" and reply.content == "My phone has no service."
    prompt, seen_tools, sampling = backend.seen[0]
    assert prompt[0].role == "system"
    assert task.scenario.instructions in (prompt[0].content or "") and STOP in (
        prompt[0].content or ""
    )
    assert [m.role for m in prompt[1:]] == ["user", "assistant", "user", "assistant", "tool"]
    assert prompt[1].content == "Hi! How can I help you today?"
    assert seen_tools == tools and sampling.seed == 301


def test_tool_calls_become_user_calls_and_malformed_output_stays_text() -> None:
    task = get_domain("telecom").task("airplane_00")
    call = ToolCall(id="x", name="set_airplane_mode", arguments={"on": False})
    user = LLMUser(Echo(Message(role="assistant", tool_calls=[call])))
    user.start(task, 1, lambda: False)
    reply = asyncio.run(user.act([Message(role="assistant", content="Turn it off.")], []))
    assert [c.requestor for c in reply.tool_calls] == ["user"]

    broken = Message(
        role="assistant", content="<tool_call>{oops", malformed=True, tool_calls=[call]
    )
    user = LLMUser(Echo(broken))
    user.start(task, 1, lambda: False)
    reply = asyncio.run(user.act([Message(role="assistant", content="Hi")], []))
    assert reply.tool_calls == [] and reply.content == "<tool_call>{oops"
