"""Retail: data files, tasks, and every tool's success and error results."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from flatscore.domains import get_domain
from flatscore.domains.framework import Environment, Task
from flatscore.domains.retail.models import RetailDB
from flatscore.episode import ToolCall, ToolResult

DOMAIN = get_domain("retail")


def call(env: Environment, name: str, requestor: str = "agent", **arguments: Any) -> ToolResult:
    """Run one call through the environment, as the runner does."""
    return env.execute(ToolCall(id="c1", name=name, arguments=arguments, requestor=requestor))  # type: ignore[arg-type]


def _env() -> Environment:
    return DOMAIN.new_environment(DOMAIN.tasks()[0])


def _db(env: Environment) -> RetailDB:
    assert isinstance(env.db, RetailDB)
    return env.db


def _order(env: Environment, status: str) -> str:
    return next(o.order_id for o in _db(env).orders.values() if o.status == status)


def test_task_set_size_split_and_action_counts() -> None:
    tasks = DOMAIN.tasks()
    assert len(tasks) >= 60
    assert len(DOMAIN.tasks("test")) >= 20
    assert len(DOMAIN.tasks("train")) + len(DOMAIN.tasks("test")) == len(tasks)
    assert len({t.id for t in tasks}) == len(tasks)
    assert all(1 <= len(t.actions) <= 6 for t in tasks)
    per_template = Counter(t.template for t in DOMAIN.tasks("test"))
    assert set(per_template) == {t.template for t in tasks}  # every template is tested


@pytest.mark.parametrize("task", DOMAIN.tasks(), ids=lambda t: t.id)
def test_gold_actions_succeed_and_satisfy_the_task(task: Task) -> None:
    env = DOMAIN.new_environment(task)
    for action in task.actions:
        env.apply(action)
    assert env.db_hash() == DOMAIN.gold_hash(task)
    for item in task.communicate:
        assert item in task.final_message


def test_lookups() -> None:
    env = _env()
    user = next(iter(_db(env).users.values()))
    found = call(env, "find_user_by_email", email=user.email.upper())
    assert not found.error and json.loads(found.text)["user_id"] == user.user_id
    found = call(
        env,
        "find_user_by_name_zip",
        first_name=user.first_name,
        last_name=user.last_name,
        zip=user.zip,
    )
    assert not found.error and json.loads(found.text)["order_ids"] == user.order_ids
    order = call(env, "get_order", order_id=user.order_ids[0])
    assert json.loads(order.text)["order_id"] == user.order_ids[0]
    product = json.loads(call(env, "get_product", product_id="P01").text)
    assert product["name"] == "T-Shirt" and product["variants"]


def test_unparseable_arguments_are_bad_arguments() -> None:
    result = _env().execute(ToolCall(id="x", name="get_order", arguments='{"order_id": W1'))
    assert result.error_kind == "bad_arguments" and "not a valid JSON object" in result.text


def test_unknown_tool_uses_tau2_text() -> None:
    result = call(_env(), "get_user_details", user_id="U1001")
    assert (result.error_kind, result.text) == (
        "unknown_tool",
        "Error: Tool 'get_user_details' not found.",
    )


def test_preconditions() -> None:
    env = _env()
    delivered, pending = _order(env, "delivered"), _order(env, "pending")
    cases = [
        (
            "cancel_order",
            {"order_id": delivered, "reason": "no longer needed"},
            "only pending orders can be cancelled",
        ),
        (
            "change_address",
            {"order_id": delivered, "address": "1 Main St, X"},
            "only pending orders can change address",
        ),
        (
            "return_items",
            {"order_id": pending, "item_ids": ["I1001"]},
            "only delivered orders can be returned or exchanged",
        ),
        (
            "exchange_items",
            {"order_id": pending, "item_ids": ["I1001"], "new_item_ids": ["I1002"]},
            "only delivered orders can be returned or exchanged",
        ),
    ]
    for name, arguments, reason in cases:
        result = call(env, name, **arguments)
        assert result.error_kind == "precondition", (name, result)
        assert reason in result.text


def test_cancel_then_cancel_again() -> None:
    env = _env()
    pending = _order(env, "pending")
    first = call(env, "cancel_order", order_id=pending, reason="ordered by mistake")
    assert not first.error and json.loads(first.text)["status"] == "cancelled"
    again = call(env, "cancel_order", order_id=pending, reason="ordered by mistake")
    assert again.error_kind == "precondition" and "is cancelled" in again.text


def test_return_and_exchange_item_checks() -> None:
    env = _env()
    db = _db(env)
    order = next(o for o in db.orders.values() if o.status == "delivered")
    item = order.items[0]
    missing = call(env, "return_items", order_id=order.order_id, item_ids=["I0000"])
    assert missing.error_kind == "entity_not_found" and "not found in order" in missing.text
    twice = call(env, "return_items", order_id=order.order_id, item_ids=[item.item_id] * 2)
    assert twice.error_kind == "precondition"
    other_product = next(
        v.item_id
        for p in db.products.values()
        if p.product_id != item.product_id
        for v in p.variants
    )
    wrong = call(
        env,
        "exchange_items",
        order_id=order.order_id,
        item_ids=[item.item_id],
        new_item_ids=[other_product],
    )
    assert wrong.error_kind == "precondition" and "same product" in wrong.text
    same = call(
        env,
        "exchange_items",
        order_id=order.order_id,
        item_ids=[item.item_id],
        new_item_ids=[item.item_id],
    )
    assert same.error_kind == "precondition"
    lengths = call(
        env,
        "exchange_items",
        order_id=order.order_id,
        item_ids=[item.item_id],
        new_item_ids=[item.item_id, item.item_id],
    )
    assert lengths.error_kind == "bad_arguments" and "'new_item_ids'" in lengths.text
    unavailable = [
        v.item_id
        for v in db.products[item.product_id].variants
        if not v.available and v.item_id != item.item_id
    ]
    if unavailable:
        result = call(
            env,
            "exchange_items",
            order_id=order.order_id,
            item_ids=[item.item_id],
            new_item_ids=unavailable[:1],
        )
        assert result.error_kind == "precondition" and "not available" in result.text
    ok = call(env, "return_items", order_id=order.order_id, item_ids=[item.item_id])
    assert not ok.error and json.loads(ok.text)["refund"] == item.price


def test_failed_calls_do_not_change_the_database() -> None:
    env = _env()
    before = env.db_hash()
    call(env, "cancel_order", order_id=_order(env, "delivered"), reason="no longer needed")
    call(env, "return_items", order_id=_order(env, "delivered"), item_ids=["I0000"])
    assert env.db_hash() == before


def test_evaluate_fails_when_the_database_differs_from_the_gold_replay() -> None:
    """evaluate() compares the episode's database with the gold replay: before the gold
    actions it differs (db 0, reward 0); after them it matches (db 1)."""
    task = next(t for t in DOMAIN.tasks() if any(a.requestor == "agent" for a in t.actions))
    env = DOMAIN.new_environment(task)
    before = DOMAIN.evaluate(task, env, [])
    assert before.breakdown["db"] == 0.0 and before.reward == 0.0
    for action in task.actions:
        env.apply(action)
    after = DOMAIN.evaluate(task, env, [])
    assert after.breakdown["db"] == 1.0
