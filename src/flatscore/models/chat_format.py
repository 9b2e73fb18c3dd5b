"""The chat format of the local backend: ChatML (SmolLM2's template) with a compact tool
listing in the system turn, and tool calls as `<tool_call>{json}</tool_call>` blocks.

The embedded agent is fine-tuned in exactly this format, so rendering is deterministic and
append-only: rendering a conversation that grew by some messages gives the old text as a
prefix (the local backend's KV-cache reuse relies on it). Every token costs on CPU, so the
tool listing is one short line per tool instead of the full JSON schema.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from flatscore.episode import Message, ToolCall
from flatscore.models.base import ContextWindowExceeded, Sampling

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
CALL_OPEN = "<tool_call>"
CALL_CLOSE = "</tool_call>"
DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
CALL_INSTRUCTION = (
    'To call a tool, reply with <tool_call>{"name": "tool_name", "arguments": {...}}</tool_call>'
)


def _type_str(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return "|".join(json.dumps(v) for v in schema["enum"])
    kind = schema.get("type", "any")
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind)
    if kind == "array":
        return f"list[{_type_str(schema.get('items', {}))}]"
    return str(kind)


def tool_signature(tool: dict[str, Any]) -> str:
    """`- name(arg: type, opt?: type): description` for one OpenAI-format tool."""
    fn = tool.get("function", tool)
    params = fn.get("parameters") or {}
    required = set(params.get("required", []))
    args = [
        f"{name}{'' if name in required else '?'}: {_type_str(spec or {})}"
        for name, spec in (params.get("properties") or {}).items()
    ]
    description = " ".join(str(fn.get("description", "")).split())
    line = f"- {fn['name']}({', '.join(args)})"
    return f"{line}: {description}" if description else line


def tools_block(tools: list[dict[str, Any]]) -> str:
    """The text appended to the system turn when tools are offered."""
    if not tools:
        return ""
    lines = "\n".join(tool_signature(t) for t in tools)
    return f"\n\nTools:\n{lines}\n{CALL_INSTRUCTION}"


def render_call(call: ToolCall) -> str:
    args = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
    return f'{CALL_OPEN}{{"name": {json.dumps(call.name)}, "arguments": {args}}}{CALL_CLOSE}'


def render_assistant_body(message: Message) -> str:
    """What the model would have written for this assistant turn (before `<|im_end|>`)."""
    parts = [message.content] if message.content else []
    parts += [render_call(c) for c in message.tool_calls]
    return "\n".join(parts)


@dataclass
class AgentSpan:
    """Characters `[start, end)` of the rendered text written by the agent in message
    `message_index` (its body plus the closing `<|im_end|>`, which ends the turn)."""

    start: int
    end: int
    message_index: int


@dataclass
class Rendered:
    text: str
    agent_spans: list[AgentSpan] = field(default_factory=list)


def render(
    messages: list[Message],
    tools: list[dict[str, Any]],
    *,
    add_generation_prompt: bool = True,
) -> Rendered:
    """Render a conversation. The tool listing joins the first system message (or the
    default SmolLM2 system prompt when there is none)."""
    out: list[str] = []
    spans: list[AgentSpan] = []
    pos = 0

    def emit(text: str) -> None:
        nonlocal pos
        out.append(text)
        pos += len(text)

    block = tools_block(tools)
    if not messages or messages[0].role != "system":
        emit(f"{IM_START}system\n{DEFAULT_SYSTEM}{block}{IM_END}\n")
        block = ""
    for index, message in enumerate(messages):
        if message.role == "assistant":
            emit(f"{IM_START}assistant\n")
            start = pos
            emit(render_assistant_body(message) + IM_END)
            spans.append(AgentSpan(start, pos, index))
            emit("\n")
        elif message.role == "tool":
            assert message.tool_result is not None
            emit(f"{IM_START}tool\n{message.tool_result.text}{IM_END}\n")
        else:
            extra = block if message.role == "system" else ""
            block = "" if message.role == "system" else block
            emit(f"{IM_START}{message.role}\n{message.content or ''}{extra}{IM_END}\n")
    if add_generation_prompt:
        emit(f"{IM_START}assistant\n")
    return Rendered("".join(out), spans)


def forced_prefix(tool_choice: Any) -> str:
    """Text the assistant turn is forced to start with, implementing `tool_choice` locally:
    `required` opens a call block; a named function also fixes the name."""
    if tool_choice == "required":
        return CALL_OPEN
    if isinstance(tool_choice, dict):
        name = (tool_choice.get("function") or {}).get("name")
        if name:
            return f'{CALL_OPEN}{{"name": {json.dumps(name)}, "arguments": '
    return ""


# --------------------------------------------------------------------------- parsing

_BLOCK = re.compile(re.escape(CALL_OPEN) + r"(.*?)(?:" + re.escape(CALL_CLOSE) + r"|\Z)", re.S)
_NAME = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
_ARGS = re.compile(r'"(?:arguments|parameters)"\s*:\s*(.*?)\s*\}?\s*\Z', re.S)
_FENCE = re.compile(r"\A```(?:json)?\s*(.*?)\s*```\Z", re.S)


def _arguments(value: Any) -> dict[str, Any] | str:
    """Parsed arguments, or the raw text when they are not a JSON object."""
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return value
        return parsed if isinstance(parsed, dict) else value
    return json.dumps(value)


def parse_call(body: str, call_id: str) -> ToolCall | None:
    """One call from `{"name": ..., "arguments": {...}}`; broken argument JSON is kept as
    the raw string when the name can still be read. None when no name can be found."""
    text = body.strip()
    try:
        obj, _ = json.JSONDecoder().raw_decode(text)
    except ValueError:
        obj = None
    if isinstance(obj, dict) and isinstance(obj.get("name"), str):
        raw = obj.get("arguments", obj.get("parameters", {}))
        return ToolCall(id=call_id, name=obj["name"], arguments=_arguments(raw))
    if obj is not None:
        return None
    name = _NAME.search(text)
    if name is None:
        return None
    args = _ARGS.search(text)
    return ToolCall(
        id=call_id,
        name=json.loads(f'"{name.group(1)}"'),
        arguments=args.group(1) if args else text,
    )


def parse_assistant(text: str, call_id_prefix: str = "call") -> Message:
    """The assistant message in a model's raw output.

    - `<tool_call>` blocks: one call each (text outside them is the content); if any block
      has no readable name, the whole turn is malformed.
    - otherwise text starting with `{` (optionally in a ```json fence) is a bare call
      attempt: a call if a name can be read, else malformed.
    - otherwise non-empty text is a plain message; empty output is malformed.
    Malformed turns keep the raw text as content.
    """
    stripped = text.strip()
    malformed = Message(role="assistant", content=text, malformed=True)
    if CALL_OPEN in stripped:
        calls = []
        for i, block in enumerate(_BLOCK.finditer(stripped)):
            call = parse_call(block.group(1), f"{call_id_prefix}_{i}")
            if call is None:
                return malformed
            calls.append(call)
        content = _BLOCK.sub("", stripped).strip() or None
        return Message(role="assistant", content=content, tool_calls=calls)
    fenced = _FENCE.match(stripped)
    candidate = fenced.group(1) if fenced else stripped
    if candidate.startswith("{"):
        call = parse_call(candidate, f"{call_id_prefix}_0")
        if call is None:
            return malformed
        return Message(role="assistant", tool_calls=[call])
    if not stripped:
        return malformed
    return Message(role="assistant", content=stripped)


@dataclass(frozen=True)
class Prompt:
    """One turn's prompt as a local backend feeds it: the token ids, the tools offered and
    the forced prefix the model's text continues (empty unless `tool_choice` forces a call)."""

    ids: list[int]
    offered: list[dict[str, Any]]
    prefix: str


def encode_conversation(tokenizer: Any, text: str, offsets: bool = False) -> Any:
    """Tokenize `text` rendered from a conversation's start, with the tokenizer's own
    beginning-of-sequence token where it adds one: Gemma's does (without its `<bos>` the
    model is far off its training distribution), SmolLM2's adds none (its ids are
    unchanged). Training, serving, calibration and margins all tokenize through here."""
    return tokenizer(text, add_special_tokens=True, return_offsets_mapping=offsets)


def encode_prompt(
    messages: list[Message],
    tools: list[dict[str, Any]],
    sampling: Sampling,
    encode: Any,
    max_context: int,
) -> Prompt:
    """Render and encode one turn (no tools offered under `tool_choice: none`), refusing a
    prompt whose tokens plus `max_tokens` do not fit the context window: the one rule every
    local backend (the engine, llama.cpp) applies."""
    offered = [] if sampling.tool_choice == "none" else tools
    prefix = forced_prefix(sampling.tool_choice) if offered else ""
    ids = encode(render(messages, offered).text + prefix)
    if len(ids) + sampling.max_tokens > max_context:
        raise ContextWindowExceeded(
            f"prompt of {len(ids)} tokens + max_tokens {sampling.max_tokens} exceeds the "
            f"context window of {max_context}"
        )
    return Prompt(ids=ids, offered=offered, prefix=prefix)
