"""Rendering (append-only, compact tools) and tool-call parsing of the local chat format."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from flatscore.episode import Message, ToolCall, ToolResult
from flatscore.models.chat_format import (
    CALL_OPEN,
    DEFAULT_SYSTEM,
    forced_prefix,
    parse_assistant,
    render,
    render_call,
    tool_signature,
)

TOOL = {
    "type": "function",
    "function": {
        "name": "cancel_order",
        "description": "Cancel a  pending\norder.",
        "parameters": {
            "type": "object",
            "properties": {
                "order_id": {"type": "string"},
                "reason": {"enum": ["no longer needed", "mistake"]},
                "items": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["order_id", "reason"],
        },
    },
}


def test_tool_signature_is_one_compact_line() -> None:
    assert tool_signature(TOOL) == (
        '- cancel_order(order_id: string, reason: "no longer needed"|"mistake", '
        "items?: list[string]): Cancel a pending order."
    )


def test_render_puts_tools_in_the_system_turn_and_marks_agent_spans() -> None:
    call = ToolCall(id="c1", name="cancel_order", arguments={"order_id": "#W1"})
    msgs = [
        Message(role="system", content="Be brief."),
        Message(role="user", content="cancel #W1"),
        Message(role="assistant", tool_calls=[call]),
        Message(role="tool", tool_result=ToolResult(call_id="c1", text="ok")),
        Message(role="assistant", content="Done."),
    ]
    out = render(msgs, [TOOL])
    assert out.text.startswith("<|im_start|>system\nBe brief.\n\nTools:\n- cancel_order(")
    assert out.text.endswith("<|im_start|>assistant\n")
    assert "<|im_start|>tool\nok<|im_end|>\n" in out.text
    spans = [out.text[s.start : s.end] for s in out.agent_spans]
    assert spans == [render_call(call) + "<|im_end|>", "Done.<|im_end|>"]
    assert [s.message_index for s in out.agent_spans] == [2, 4]


def test_default_system_prompt_when_none_given() -> None:
    text = render([Message(role="user", content="hi")], []).text
    assert text == (
        f"<|im_start|>system\n{DEFAULT_SYSTEM}<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


_texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20)
_messages = st.lists(
    st.one_of(
        st.builds(lambda t: Message(role="user", content=t), _texts),
        st.builds(lambda t: Message(role="assistant", content=t), _texts),
        st.builds(
            lambda n: Message(
                role="assistant", tool_calls=[ToolCall(id="c", name=n, arguments={"a": n})]
            ),
            _texts,
        ),
        st.builds(
            lambda t: Message(role="tool", tool_result=ToolResult(call_id="c", text=t)), _texts
        ),
    ),
    max_size=8,
)


@given(_messages, st.integers(0, 8), st.booleans())
def test_rendering_is_append_only(messages: list[Message], cut: int, system: bool) -> None:
    """What KV reuse relies on: a shorter conversation renders to a prefix."""
    if system:
        messages = [Message(role="system", content="S"), *messages]
        cut = max(cut, 1)  # the conversation grows from its system turn
    tools = [TOOL] if cut % 2 else []
    short = render(messages[:cut], tools, add_generation_prompt=False).text
    assert render(messages, tools, add_generation_prompt=False).text.startswith(short)


@given(
    st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3),
    st.text(min_size=1, max_size=10),
)
def test_rendered_calls_parse_back(arguments: dict[str, object], name: str) -> None:
    call = ToolCall(id="call_0", name=name, arguments=arguments)
    parsed = parse_assistant(render_call(call))
    assert not parsed.malformed
    assert parsed.tool_calls == [call]


def test_parse_plain_text_is_a_message() -> None:
    m = parse_assistant("  Your order has shipped. ")
    assert m.content == "Your order has shipped." and not m.tool_calls and not m.malformed


def test_parse_several_blocks_with_text() -> None:
    raw = (
        'Let me check.\n<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>\n'
        '<tool_call>{"name": "b", "arguments": "{\\"y\\": 2}"}</tool_call>'
    )
    m = parse_assistant(raw, "call_3")
    assert m.content == "Let me check."
    assert [(c.id, c.name, c.arguments) for c in m.tool_calls] == [
        ("call_3_0", "a", {"x": 1}),
        ("call_3_1", "b", {"y": 2}),
    ]
    assert all(c.requestor == "agent" for c in m.tool_calls)


def test_parse_bare_json_and_fenced_json() -> None:
    for raw in (
        '{"name": "a", "arguments": {"x": 1}}',
        '```json\n{"name": "a", "parameters": {"x": 1}}\n```',
    ):
        m = parse_assistant(raw)
        assert [(c.name, c.arguments) for c in m.tool_calls] == [("a", {"x": 1})]


def test_broken_argument_json_keeps_the_raw_string() -> None:
    m = parse_assistant(
        '<tool_call>{"name": "get_order", "arguments": {"order_id": "#W1}</tool_call>'
    )
    assert not m.malformed
    (call,) = m.tool_calls
    assert call.name == "get_order" and call.arguments == '{"order_id": "#W1'
    truncated = parse_assistant('<tool_call>{"name": "get_order", "arguments": {"order_id": "#')
    assert truncated.tool_calls[0].arguments == '{"order_id": "#'


def test_non_object_arguments_are_kept_as_text() -> None:
    (call,) = parse_assistant('{"name": "a", "arguments": [1, 2]}').tool_calls
    assert call.arguments == "[1, 2]"


def test_unparseable_outputs_are_malformed_and_kept_verbatim() -> None:
    for raw in [
        "",
        "   ",
        "<tool_call>I will call the tool</tool_call>",
        '{"answer": 42}',
        "{ not json at all",
        "<tool_call>",
    ]:
        m = parse_assistant(raw)
        assert m.malformed and m.content == raw and not m.tool_calls


def test_forced_prefix_implements_tool_choice() -> None:
    assert forced_prefix("auto") == "" and forced_prefix("none") == ""
    assert forced_prefix("required") == CALL_OPEN
    named = forced_prefix({"type": "function", "function": {"name": "a"}})
    m = parse_assistant(named + '{"x": 1}}</tool_call>')
    assert [(c.name, c.arguments) for c in m.tool_calls] == [("a", {"x": 1})]
    assert json.loads(named[len(CALL_OPEN) :] + "1}")["name"] == "a"
