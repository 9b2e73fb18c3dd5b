"""The small chat both backend test modules send: one retail tool, a system prompt and a
user question, and the same conversation continued with a tool call and its result."""

from __future__ import annotations

from typing import Any

from flatscore.episode import Message, ToolCall, ToolResult


def order_tool(name: str, description: str) -> dict[str, Any]:
    """An OpenAI-style tool taking one required `order_id` string."""
    parameters = {
        "type": "object",
        "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"],
    }
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


TOOLS: list[dict[str, Any]] = [order_tool("get_order_details", "Get an order's status.")]
START = [
    Message(role="system", content="You are a retail support agent."),
    Message(role="user", content="Where is my order #W123?"),
]
CONVERSATION = [
    *START,
    Message(
        role="assistant",
        tool_calls=[ToolCall(id="c0", name="get_order_details", arguments={"order_id": "#W123"})],
    ),
    Message(role="tool", tool_result=ToolResult(call_id="c0", text='{"status": "shipped"}')),
]
