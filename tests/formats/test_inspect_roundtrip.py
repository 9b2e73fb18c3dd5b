"""Property: any canonical run exported as Inspect logs and imported again is the same run
(messages, calls, results, error flags and kinds, rewards, endings, tool lists, usage),
through Inspect's own writer and reader."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("inspect_ai", reason="the `inspect` extra is not installed")

from analysis_builders import cell
from flatscore.episode import (
    Episode,
    Message,
    TerminationReason,
    TokenUsage,
    ToolCall,
    ToolLists,
    ToolResult,
)
from flatscore.formats.inspect_export import export_inspect
from flatscore.formats.inspect_log import read_inspect

TOOLS = ["get_order", "cancel_order"]
USER_TOOLS = ["toggle_airplane_mode"]
texts = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20
)
names = st.sampled_from([*TOOLS, *USER_TOOLS, "made_up"])
arguments = st.dictionaries(st.sampled_from(["id", "reason"]), texts, max_size=2) | texts
kinds = st.sampled_from([None, "unknown_tool", "bad_arguments", "precondition", "other"])


@st.composite
def episodes(draw: st.DrawFn, task: str) -> Episode:
    messages = [Message(role="system", content=draw(texts) or None)]
    messages.append(Message(role="user", content=draw(texts) or None))
    for i in range(draw(st.integers(0, 4))):
        call = ToolCall(id=f"c{i}", name=draw(names), arguments=draw(arguments))
        messages.append(Message(role="assistant", content=draw(texts) or None, tool_calls=[call]))
        if draw(st.booleans()):
            failed = draw(st.booleans())
            messages.append(
                Message(
                    role="tool",
                    tool_result=ToolResult(
                        call_id=call.id,
                        error=failed,
                        text=draw(texts),
                        error_kind=draw(kinds) if failed else None,
                    ),
                )
            )
    if draw(st.booleans()):  # the user's own tool call and its answer (telecom)
        call = ToolCall(id="u0", name=USER_TOOLS[0], arguments={}, requestor="user")
        messages.append(Message(role="user", content="ok", tool_calls=[call]))
        messages.append(
            Message(
                role="tool",
                tool_result=ToolResult(
                    call_id="u0", requestor="user", error=draw(st.booleans()), text="done"
                ),
            )
        )
    messages.append(
        Message(role="assistant", content=draw(texts) or None, malformed=draw(st.booleans()))
    )
    trial = draw(st.integers(0, 3))
    return Episode(
        **cell(task, trial, arm="int4", domain="retail"),
        messages=messages,
        termination_reason=draw(st.sampled_from(list(TerminationReason))),
        reward=draw(st.none() | st.sampled_from([0.0, 0.5, 1.0])),
        reward_breakdown=draw(st.dictionaries(st.sampled_from(["db", "action"]), st.just(1.0))),
        tools=ToolLists(agent=TOOLS, user=USER_TOOLS, source="bundled"),
        usage=TokenUsage(prompt_tokens=draw(st.integers(0, 9999)), completion_tokens=7),
    )


def comparable(ep: Episode) -> dict[str, Any]:
    return ep.model_dump(exclude={"source": True})


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(["t1", "t2", "t3"]), min_size=1, max_size=3, unique=True).flatmap(
    lambda tasks: st.tuples(*(episodes(t) for t in tasks))
))  # fmt: skip
def test_export_then_import_is_the_identity(run: tuple[Episode, ...]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        [log] = export_inspect(run, Path(tmp))
        back = list(read_inspect(log.path))
    key = {ep.episode_id: comparable(ep) for ep in run}
    assert {ep.episode_id: comparable(ep) for ep in back} == key
