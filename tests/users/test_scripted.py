"""The scripted user: deterministic by seed, varied across seeds, answers what it is asked."""

from __future__ import annotations

import asyncio

from flatscore.domains import get_domain
from flatscore.domains.framework import Task
from flatscore.episode import Message, ToolResult
from flatscore.users import STOP, ScriptedUser, is_stop, make_user
from flatscore.users.scripted import requested_keys

RETAIL = get_domain("retail")
TELECOM = get_domain("telecom")
GREETING = Message(role="assistant", content="Hi! How can I help you today?")


def _task(domain_tasks: list[Task], auth: str) -> Task:
    return next(t for t in domain_tasks if auth in t.scenario.known_info)


def _start(task: Task, seed: int = 1, goal: bool = False, patience: int = 3) -> ScriptedUser:
    user = ScriptedUser(patience=patience)
    user.start(task, seed, lambda: goal)
    return user


def _say(user: ScriptedUser, history: list[Message], text: str) -> Message:
    history.append(Message(role="assistant", content=text))
    reply = asyncio.run(user.act(history, []))
    history.append(reply)
    return reply


def test_opening_is_one_of_the_requests_and_fixed_by_seed() -> None:
    task = RETAIL.tasks()[0]
    first = asyncio.run(_start(task, seed=5).act([GREETING], []))
    again = asyncio.run(_start(task, seed=5).act([GREETING], []))
    assert first.role == "user" and first.content in task.scenario.requests
    assert first == again
    openings = {asyncio.run(_start(task, seed=s).act([GREETING], [])).content for s in range(30)}
    assert len(openings) > 1  # phrasing varies with the seed


def test_answers_email_and_name_zip() -> None:
    task = _task(RETAIL.tasks(), "email")
    user = _start(task)
    history = [GREETING, asyncio.run(user.act([GREETING], []))]
    reply = _say(user, history, "Could you please give me your email address?")
    assert task.scenario.known_info["email"] in (reply.content or "")
    reply = _say(user, history, "What is your name and zip code?")
    assert "rather give you my email" in (reply.content or "") or "use my email" in (
        reply.content or ""
    )

    task = _task(RETAIL.tasks(), "zip")
    user = _start(task)
    history = [GREETING, Message(role="user", content="hi")]
    reply = _say(user, history, "Can I have your email?")
    assert "remember" in (reply.content or "")
    reply = _say(user, history, "Then your first name, last name and zip code, please.")
    info = task.scenario.known_info
    for key in ("first_name", "last_name", "zip"):
        assert info[key] in (reply.content or "")


def test_stops_when_goal_reached() -> None:
    user = _start(RETAIL.tasks()[0], goal=True)
    reply = _say(user, [GREETING, Message(role="user", content="hi")], "Done!")
    assert is_stop(reply.content) and STOP in (reply.content or "")


def test_gives_up_after_patience_turns_without_progress() -> None:
    user = _start(RETAIL.tasks()[0], patience=3)
    history = [GREETING, Message(role="user", content="hi")]
    replies = [_say(user, history, "Sorry, I can't.") for _ in range(3)]
    assert [is_stop(r.content) for r in replies] == [False, False, True]


def test_repeating_the_same_question_is_not_progress() -> None:
    task = _task(RETAIL.tasks(), "email")
    user = _start(task, patience=2)
    history = [GREETING, Message(role="user", content="hi")]
    first = _say(user, history, "Your email?")
    second = _say(user, history, "Your email?")
    third = _say(user, history, "Your email?")
    assert not is_stop(first.content) and not is_stop(second.content) and is_stop(third.content)


def test_performs_device_actions_and_reports() -> None:
    task = TELECOM.task("airplane_00")
    user = _start(task)
    history = [GREETING, Message(role="user", content="My phone has no service.")]
    reply = _say(user, history, "Please turn off airplane mode on your phone.")
    assert reply.content is None
    [call] = reply.tool_calls
    assert (call.name, call.arguments, call.requestor) == (
        "set_airplane_mode",
        {"on": False},
        "user",
    )
    history.append(
        Message(
            role="tool",
            tool_result=ToolResult(
                call_id=call.id, requestor="user", text="Airplane mode is now off."
            ),
        )
    )
    report = asyncio.run(user.act(history, []))
    assert "Airplane mode is now off." in (report.content or "")
    assert not is_stop(report.content)


def test_requested_keys() -> None:
    assert requested_keys("What's your e-mail?") == ["email"]
    assert requested_keys("Please give me your phone number.") == ["phone_number"]
    assert requested_keys("What is the order number?") == []
    assert requested_keys("Shall I proceed with the cancellation?") == ["confirm"]


def test_registry_builds_a_scripted_user() -> None:
    assert isinstance(make_user("scripted"), ScriptedUser)
