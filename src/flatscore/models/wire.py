"""The OpenAI chat-completions wire format <-> flatscore's types, both directions.

Used by the `openai` backend (requests out, responses in) and by `flatscore serve`
(requests in, responses out), so the two agree by construction.
"""

from __future__ import annotations

import json
from typing import Any

from flatscore.episode import (
    Message,
    Requestor,
    TokenLogprob,
    ToolCall,
    ToolResult,
    TopLogprob,
    TurnTiming,
)


def _arguments_text(call: ToolCall) -> str:
    return call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)


def message_to_wire(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        assert message.tool_result is not None
        return {
            "role": "tool",
            "tool_call_id": message.tool_result.call_id,
            "content": message.tool_result.text,
        }
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": _arguments_text(c)},
            }
            for c in message.tool_calls
        ]
    elif out["content"] is None:
        out["content"] = ""
    return out


def request_message_to_wire(message: Message) -> dict[str, Any]:
    """One message of a request, in the form every common server takes: `content` is always
    a string. An assistant turn with tool calls goes out with `content: ""`, never null or
    omitted: OpenAI and vLLM take all three, but llama.cpp's server refuses null (its
    request schema wants a string) and fails (500) rendering its chat template without one."""
    out = message_to_wire(message)
    if out.get("content") is None:
        out["content"] = ""
    return out


def parse_arguments(text: Any) -> dict[str, Any] | str:
    """Arguments as a dict when they are a JSON object; otherwise kept as the raw string."""
    if isinstance(text, dict):
        return text
    if not isinstance(text, str):
        return json.dumps(text)
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested too deeply to be arguments
        return text
    return value if isinstance(value, dict) else text


def _content_text(content: Any) -> str | None:
    """OpenAI content may be a string or a list of parts; only text parts matter here."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def calls_from_wire(raw_calls: Any, requestor: Requestor = "agent") -> list[ToolCall]:
    calls = []
    for i, raw in enumerate(raw_calls or []):
        fn = raw.get("function") or {}
        calls.append(
            ToolCall(
                id=str(raw.get("id") or f"call_{i}"),
                name=str(fn.get("name", "")),
                arguments=parse_arguments(fn.get("arguments", "{}")),
                requestor=requestor,
            )
        )
    return calls


def message_from_wire(raw: dict[str, Any]) -> Message:
    """One request message. Raises ValueError/KeyError on shapes that are not messages."""
    role = raw["role"]
    if role == "developer":
        role = "system"
    if role == "tool":
        return Message(
            role="tool",
            tool_result=ToolResult(
                call_id=str(raw.get("tool_call_id", "")),
                text=_content_text(raw.get("content")) or "",
            ),
        )
    if role not in {"system", "user", "assistant"}:
        raise ValueError(f"unsupported role {role!r}")
    return Message(
        role=role,
        content=_content_text(raw.get("content")),
        tool_calls=calls_from_wire(raw.get("tool_calls")) if role == "assistant" else [],
    )


def logprobs_from_wire(raw: Any) -> list[TokenLogprob] | None:
    content = (raw or {}).get("content") if isinstance(raw, dict) else None
    if not content:
        return None
    return [
        TokenLogprob(
            token=str(t.get("token", "")),
            logprob=float(t.get("logprob", 0.0)),
            top=[
                TopLogprob(token=str(a.get("token", "")), logprob=float(a.get("logprob", 0.0)))
                for a in t.get("top_logprobs") or []
            ],
        )
        for t in content
    ]


def logprobs_to_wire(logprobs: list[TokenLogprob]) -> dict[str, Any]:
    return {
        "content": [
            {
                "token": t.token,
                "logprob": t.logprob,
                "bytes": list(t.token.encode("utf-8")),
                "top_logprobs": [
                    {"token": a.token, "logprob": a.logprob, "bytes": list(a.token.encode())}
                    for a in t.top
                ],
            }
            for t in logprobs
        ]
    }


def endpoint_timing(timings: object) -> TurnTiming | None:
    """The server's own prefill/decode timing when it reports one (llama.cpp's `timings`:
    `prompt_n`, `prompt_ms`, `predicted_ms`); vLLM and OpenAI report none (None)."""
    if not isinstance(timings, dict):
        return None

    def number(key: str) -> float | None:
        v = timings.get(key)
        if isinstance(v, bool) or not isinstance(v, int | float):
            return None
        return float(v) if 0 <= v < float("inf") else None

    prompt_ms, predicted_ms = number("prompt_ms"), number("predicted_ms")
    prompt_n = number("prompt_n")
    if prompt_ms is None and predicted_ms is None:
        return None
    return TurnTiming(
        prefill_s=None if prompt_ms is None else prompt_ms / 1000,
        decode_s=None if predicted_ms is None else predicted_ms / 1000,
        encoded_tokens=None if prompt_n is None else int(prompt_n),
        source="endpoint",
    )
