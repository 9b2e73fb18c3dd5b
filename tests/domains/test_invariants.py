"""Properties of every built-in domain, over arbitrary calls: the environment never raises,
every failure is a classified error result, and a failed call changes nothing; and, per
domain, the calls each must refuse as a missing record or as bad arguments."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flatscore.domains import get_domain
from flatscore.episode import ToolCall, ToolResult

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


# Calls every domain must refuse as `entity_not_found` (with the exact text) or as
# `bad_arguments` naming the argument: (tool, arguments, text or argument name).
NOT_FOUND: dict[str, list[tuple[str, dict[str, Any], str]]] = {
    "retail": [
        (
            "find_user_by_email",
            {"email": "ghost@example.com"},
            "Error: User with email 'ghost@example.com' not found.",
        ),
        (
            "find_user_by_name_zip",
            {"first_name": "No", "last_name": "Body", "zip": "00000"},
            "Error: User 'No Body, 00000' not found.",
        ),
        ("get_order", {"order_id": "W9999"}, "Error: Order 'W9999' not found."),
        ("get_product", {"product_id": "P99"}, "Error: Product 'P99' not found."),
        (
            "cancel_order",
            {"order_id": "W9999", "reason": "no longer needed"},
            "Error: Order 'W9999' not found.",
        ),
        (
            "change_address",
            {"order_id": "W9999", "address": "1 Main St, X"},
            "Error: Order 'W9999' not found.",
        ),
        (
            "return_items",
            {"order_id": "W9999", "item_ids": ["I1001"]},
            "Error: Order 'W9999' not found.",
        ),
        (
            "exchange_items",
            {"order_id": "W9999", "item_ids": ["I1001"], "new_item_ids": ["I1002"]},
            "Error: Order 'W9999' not found.",
        ),
    ],
    "telecom": [
        (
            "find_customer_by_phone",
            {"phone_number": "555-0000"},
            "Error: Customer with phone number '555-0000' not found.",
        ),
        ("get_line", {"line_id": "L9"}, "Error: Line 'L9' not found."),
        ("get_bills", {"customer_id": "C9"}, "Error: Customer 'C9' not found."),
        ("pay_bill", {"bill_id": "B9"}, "Error: Bill 'B9' not found."),
        ("resume_line", {"line_id": "L9"}, "Error: Line 'L9' not found."),
        ("enable_roaming", {"line_id": "L9"}, "Error: Line 'L9' not found."),
        ("add_data", {"line_id": "L9", "gb": 1}, "Error: Line 'L9' not found."),
        ("change_plan", {"line_id": "L9", "plan_id": "P1"}, "Error: Line 'L9' not found."),
        ("change_plan", {"line_id": "L1001", "plan_id": "P9"}, "Error: Plan 'P9' not found."),
    ],
}
BAD_ARGUMENTS: dict[str, list[tuple[str, dict[str, Any], str]]] = {
    "retail": [
        ("find_user_by_email", {}, "email"),
        ("find_user_by_name_zip", {"first_name": "A", "last_name": "B"}, "zip"),
        ("get_order", {"id": "W1001"}, "order_id"),
        ("get_product", {"product_id": 7}, "product_id"),
        ("cancel_order", {"order_id": "W1001", "reason": "bored"}, "reason"),
        ("change_address", {"order_id": "W1001", "address": ""}, "address"),
        ("return_items", {"order_id": "W1001", "item_ids": []}, "item_ids"),
        ("exchange_items", {"order_id": "W1001", "item_ids": ["I1"]}, "new_item_ids"),
    ],
    "telecom": [
        ("find_customer_by_phone", {}, "phone_number"),
        ("get_line", {"line": "L1001"}, "line_id"),
        ("get_bills", {}, "customer_id"),
        ("get_plans", {"all": True}, "all"),
        ("pay_bill", {"bill_id": ["B1"]}, "bill_id"),
        ("resume_line", {}, "line_id"),
        ("enable_roaming", {"line_id": None}, "line_id"),
        ("add_data", {"line_id": "L1001", "gb": 50}, "gb"),
        ("change_plan", {"line_id": "L1001"}, "plan_id"),
    ],
}


def _refusal(domain: str, name: str, arguments: dict[str, Any]) -> ToolResult:
    env = DOMAINS[domain].new_environment(DOMAINS[domain].tasks()[0])
    return env.execute(ToolCall(id="c1", name=name, arguments=arguments))


@pytest.mark.parametrize(
    ("domain", "name", "arguments", "text"),
    [(domain, *row) for domain, rows in NOT_FOUND.items() for row in rows],
)
def test_entity_not_found(domain: str, name: str, arguments: dict[str, Any], text: str) -> None:
    result = _refusal(domain, name, arguments)
    assert (result.error, result.error_kind, result.text) == (True, "entity_not_found", text)


@pytest.mark.parametrize(
    ("domain", "name", "arguments", "argument"),
    [(domain, *row) for domain, rows in BAD_ARGUMENTS.items() for row in rows],
)
def test_bad_arguments_name_the_argument(
    domain: str, name: str, arguments: dict[str, Any], argument: str
) -> None:
    result = _refusal(domain, name, arguments)
    assert result.error and result.error_kind == "bad_arguments"
    assert result.text.startswith(f"Error: {name}()") and f"'{argument}'" in result.text
