"""Properties of every built-in domain, over arbitrary calls: the environment never raises,
every failure is a classified error result, and a failed call changes nothing."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flatscore.domains import get_domain
from flatscore.episode import ToolCall

KINDS = {"unknown_tool", "bad_arguments", "entity_not_found", "precondition", "other"}
DOMAINS = {name: get_domain(name) for name in ("retail", "telecom")}

values = st.one_of(
    st.text(max_size=8),
    st.integers(-5, 20),
    st.booleans(),
    st.none(),
    st.lists(st.text(max_size=6), max_size=3),
    st.sampled_from(["W1001", "I1001", "P01", "L1001", "C1001", "B1001", "P2", "555-1204"]),
)


@st.composite
def calls(draw: st.DrawFn) -> tuple[str, str, list[ToolCall]]:
    name = draw(st.sampled_from(sorted(DOMAINS)))
    domain = DOMAINS[name]
    task_id = draw(st.sampled_from([t.id for t in domain.tasks()]))
    lists = domain.tool_lists()
    out = []
    for i in range(draw(st.integers(1, 6))):
        requestor = draw(st.sampled_from(["agent", "user"] if lists.user else ["agent"]))
        tool = draw(st.sampled_from([*lists.agent, *lists.user, "lookup", "get_user"]))
        keys = st.sampled_from(["order_id", "line_id", "reason", "on", "gb", "item_ids", "x"])
        arguments: dict[str, Any] | str = draw(
            st.one_of(st.dictionaries(keys, values, max_size=3), st.text(max_size=5))
        )
        out.append(ToolCall(id=f"c{i}", name=tool, arguments=arguments, requestor=requestor))
    return name, task_id, out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls())
def test_arbitrary_calls_give_results_and_failures_change_nothing(
    case: tuple[str, str, list[ToolCall]],
) -> None:
    name, task_id, batch = case
    domain = DOMAINS[name]
    env = domain.new_environment(domain.task(task_id))
    for call in batch:
        before_db, before_device = env.db_hash(), env.device_state()
        result = env.execute(call)
        assert result.call_id == call.id and result.requestor == call.requestor
        if result.error:
            assert result.error_kind in KINDS and result.error_kind != "other"
            assert result.text.startswith("Error: ")
            assert env.db_hash() == before_db and env.device_state() == before_device
        else:
            assert result.error_kind is None
