"""Telecom: data files, tasks, agent tools, the user's phone tools and their phrasing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flatscore.domains import get_domain
from flatscore.domains.framework import Action, Environment, Task
from flatscore.domains.telecom.models import TelecomDB
from flatscore.domains.telecom.tools import PhoneTools
from flatscore.episode import ToolCall, ToolResult

DOMAIN = get_domain("telecom")


def call(env: Environment, name: str, requestor: str = "agent", **arguments: Any) -> ToolResult:
    """Run one call through the environment, as the runner does."""
    return env.execute(ToolCall(id="c1", name=name, arguments=arguments, requestor=requestor))  # type: ignore[arg-type]


def _env(task_id: str = "airplane_00") -> Environment:
    return DOMAIN.new_environment(DOMAIN.task(task_id))


def _db(env: Environment) -> TelecomDB:
    assert isinstance(env.db, TelecomDB)
    return env.db


def test_task_set_size_split_and_action_counts() -> None:
    tasks = DOMAIN.tasks()
    assert len(tasks) >= 60 and len(DOMAIN.tasks("test")) >= 20
    assert {len(t.actions) for t in tasks} >= {1, 6}
    assert all(1 <= len(t.actions) <= 6 for t in tasks)
    # dual control: most tasks need the user to act on the phone
    assert sum(any(a.requestor == "user" for a in t.actions) for t in tasks) >= 40


@pytest.mark.parametrize("task", DOMAIN.tasks(), ids=lambda t: t.id)
def test_gold_actions_fix_the_problem_and_are_needed(task: Task) -> None:
    env = DOMAIN.new_environment(task)
    before = DOMAIN.evaluate(task, env, [])
    for action in task.actions:
        env.apply(action)
    after = DOMAIN.evaluate(task, env, [])
    assert after.breakdown["db"] == 1.0 and after.breakdown["env_assertions"] == 1.0
    assert before.reward == 0.0  # nothing is solved before the agent acts


def test_phone_tools_are_user_only() -> None:
    env = _env()
    agent_call = call(env, "set_airplane_mode", on=False)
    assert (agent_call.error_kind, agent_call.text) == (
        "unknown_tool",
        "Error: Tool 'set_airplane_mode' not found.",
    )
    user_call = call(env, "set_airplane_mode", requestor="user", on=False)
    assert not user_call.error and user_call.requestor == "user"
    wrong_side = call(env, "get_plans", requestor="user")
    assert wrong_side.error_kind == "unknown_tool" and wrong_side.requestor == "user"
    bad = call(env, "set_mobile_data", requestor="user", on="maybe")
    assert bad.error_kind == "bad_arguments" and "'on'" in bad.text


def test_status_reflects_the_device_and_the_line() -> None:
    env = _env("airplane_00")  # airplane mode on, abroad, roaming off on the line
    status = call(env, "check_status", requestor="user").text
    assert "Airplane mode: on" in status and "Signal: none" in status
    call(env, "set_airplane_mode", requestor="user", on=False)
    assert env.device_state()["signal"] == "none"  # abroad without roaming on the line
    line = DOMAIN.task("airplane_00").actions[3].arguments["line_id"]
    assert not call(env, "enable_roaming", line_id=line).error
    assert env.device_state()["signal"] == "good" and env.device_state()["internet"] is False
    call(env, "set_data_roaming", requestor="user", on=True)
    assert env.device_state()["internet"] is True
    call(env, "set_mobile_data", requestor="user", on=False)
    assert env.device_state()["internet"] is False


def test_preconditions() -> None:
    env = _env("suspended_00")
    db = _db(env)
    line = next(line for line in db.lines.values() if line.status == "suspended")
    overdue = next(b for b in db.bills.values() if b.status == "overdue")
    paid = next(b for b in db.bills.values() if b.status == "paid")
    active = next(line for line in db.lines.values() if line.status == "active")
    cases = [
        ("resume_line", {"line_id": line.line_id}, "is overdue"),
        ("enable_roaming", {"line_id": line.line_id}, "resume it first"),
        ("add_data", {"line_id": line.line_id, "gb": 2}, "resume it first"),
        ("pay_bill", {"bill_id": paid.bill_id}, "already paid"),
        ("resume_line", {"line_id": active.line_id}, "not suspended"),
        ("change_plan", {"line_id": active.line_id, "plan_id": active.plan_id}, "already on plan"),
    ]
    for name, arguments, reason in cases:
        result = call(env, name, **arguments)
        assert result.error_kind == "precondition", (name, result)
        assert reason in result.text
    assert not call(env, "pay_bill", bill_id=overdue.bill_id).error
    assert not call(env, "resume_line", line_id=line.line_id).error
    assert not call(env, "enable_roaming", line_id=line.line_id).error
    again = call(env, "enable_roaming", line_id=line.line_id)
    assert again.error_kind == "precondition" and "already enabled" in again.text


def test_restart_registers_only_once_the_line_is_active() -> None:
    task = DOMAIN.task("suspended_00")
    env = DOMAIN.new_environment(task)
    line_id = next(a for a in task.actions if a.name == "resume_line").arguments["line_id"]
    call(env, "restart_phone", requestor="user")
    assert env.device_state()["signal"] == "none"
    for action in task.actions:
        if action.name in ("pay_bill", "resume_line"):
            env.apply(action)
    assert _db(env).lines[line_id].status == "active"
    assert env.device_state()["signal"] == "none"  # still unregistered
    call(env, "restart_phone", requestor="user")
    assert env.device_state()["signal"] == "good"


USER_ACTIONS = [
    Action(name="check_status", requestor="user"),
    *(
        Action(name=n, arguments={"on": v}, requestor="user")
        for n in ("set_airplane_mode", "set_mobile_data", "set_data_roaming")
        for v in (True, False)
    ),
    Action(name="reseat_sim", requestor="user"),
    Action(name="reset_network", requestor="user"),
    Action(name="restart_phone", requestor="user"),
]


@pytest.mark.parametrize("action", USER_ACTIONS, ids=lambda a: f"{a.name}{a.arguments}")
def test_instructions_parse_back_to_their_action(action: Action) -> None:
    assert PhoneTools.parse_requests(PhoneTools.instruction(action)) == [action]


@given(st.lists(st.sampled_from(USER_ACTIONS), min_size=1, max_size=3, unique_by=lambda a: a.name))
def test_several_instructions_parse_in_order(actions: list[Action]) -> None:
    text = " ".join(PhoneTools.instruction(a) for a in actions)
    assert PhoneTools.parse_requests(text) == actions


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("I have enabled roaming on your line.", []),
        ("Let me check the status of your line.", []),
        ("Your line was suspended because of an overdue bill.", []),
        ("Could you switch off flight mode?", ["set_airplane_mode"]),
        ("Turn on mobile data, then restart the phone.", ["set_mobile_data", "restart_phone"]),
        (
            "Can you reboot your phone and tell me what the status bar says?",
            ["restart_phone", "check_status"],
        ),
        # τ²-style guidance by the tool's exact name (issue 28)
        ("Use `set_airplane_mode(on=false)`.", ["set_airplane_mode"]),
        ("Please run reseat_sim() and then check_status().", ["reseat_sim", "check_status"]),
        ("Please use set_mobile_data().", []),  # a toggle without its value says nothing
        ("I will call get_line() now.", []),  # not a phone tool
    ],
)
def test_parse_requests_wants_an_instruction(text: str, names: list[str]) -> None:
    assert [a.name for a in PhoneTools.parse_requests(text)] == names


def test_get_line_reports_data_left() -> None:
    env = _env("refuel_00")
    task = DOMAIN.task("refuel_00")
    line_id = task.actions[-1].arguments["line_id"]
    assert json.loads(call(env, "get_line", line_id=line_id).text)["data_left_gb"] == 0
    added = json.loads(call(env, "add_data", line_id=line_id, gb=3).text)
    assert added["data_left_gb"] == 3


@pytest.mark.parametrize(
    ("text", "on"),
    [("Use `set_data_roaming(on=true)`.", True), ("Please use set_data_roaming(off).", False)],
)
def test_a_named_toggle_takes_its_value_from_the_call(text: str, on: bool) -> None:
    assert PhoneTools.parse_requests(text) == [
        Action(name="set_data_roaming", arguments={"on": on}, requestor="user")
    ]


def test_the_policy_names_every_phone_tool_and_offers_none_to_the_agent() -> None:
    """τ²'s telecom: the agent reads the user's tools by name (the names it may confuse with
    its own), while its tool list holds only its own tools."""
    for name in PhoneTools.tool_names():
        assert f"`{name}(" in DOMAIN.policy, name
    offered = {s["function"]["name"] for s in DOMAIN.agent_tool_schemas()}
    assert offered.isdisjoint(PhoneTools.tool_names())
