"""The small chat both backend test modules send: one retail tool, a system prompt and a
user question, and the same conversation continued with a tool call and its result."""

from __future__ import annotations

from typing import Any

from flatscore.episode import Message, ToolCall, ToolResult

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_order_details",
            "description": "Get an order's status.",
            "parameters": {
                "type": "object",
                "properties": {"order_id": {"type": "string"}},
                "required": ["order_id"],
            },
        },
    },
]
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
