"""The episode loop: τ² error budget, termination reasons, routing and views."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from flatscore.agents.base import Agent, ToolSchema
from flatscore.domains import get_domain
from flatscore.domains.framework import Task
from flatscore.episode import Episode, ErrorBudget, Message, TerminationReason, ToolCall
from flatscore.models.base import BackendError, ContextWindowExceeded
from flatscore.run.episode_loop import EpisodeSpec, run_episode
from flatscore.run.views import agent_view, user_view
from flatscore.users import STOP, ScriptedUser, User

RETAIL = get_domain("retail")
TELECOM = get_domain("telecom")


def call(name: str, **arguments: object) -> Message:
    return Message(role="assistant", tool_calls=[ToolCall(id="", name=name, arguments=arguments)])


def text(content: str, malformed: bool = False) -> Message:
    return Message(role="assistant", content=content, malformed=malformed)


class Scripted(Agent):
    """Says the given turns in order, then repeats the last one; records what it saw."""

    name = "script"

    def __init__(self, turns: list[Message]) -> None:
        self.turns = turns
        self.seen: list[list[Message]] = []

    async def act(self, messages: list[Message], tools: list[ToolSchema]) -> Message:
        self.seen.append(messages)
        return self.turns[min(len(self.seen) - 1, len(self.turns) - 1)]


class Raising(Agent):
    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    async def act(self, messages: list[Message], tools: list[ToolSchema]) -> Message:
        raise self.exc


class Sleeping(Agent):
    async def act(self, messages: list[Message], tools: list[ToolSchema]) -> Message:
        await asyncio.sleep(5)
        return text("late")


class Opener(User):
    """Opens with `opening`, then answers every later turn with `later`."""

    opening = ""

    def start(self, task: Task, seed: int, goal_reached: Callable[[], bool]) -> None:
        self.turns = 0

    async def act(self, messages: list[Message], tools: list[ToolSchema]) -> Message:
        self.turns += 1
        if self.turns == 1:
            return Message(role="user", content=self.opening)
        return self.later(messages)

    def later(self, messages: list[Message]) -> Message:
        raise NotImplementedError


class PhoneFumbler(Opener):
    """Opens, then calls a phone tool that does not exist every turn (a failing user)."""

    opening = "No service."

    def later(self, messages: list[Message]) -> Message:
        if messages[-1].role == "tool":
            return Message(role="user", content="It failed.")
        return Message(role="user", tool_calls=[ToolCall(id="", name="fly", arguments={})])


class Patient(User):
    """Never stops, never acts: only the agent or the budget can end the episode."""

    def start(self, task: Task, seed: int, goal_reached: Callable[[], bool]) -> None:
        pass

    async def act(self, messages: list[Message], tools: list[ToolSchema]) -> Message:
        return Message(role="user", content="Go on.")


def run(
    agent: Agent,
    *,
    domain: str = "retail",
    task: str | None = None,
    user: User | None = None,
    max_errors: int | None = 30,
    counted: str = "all",
    max_steps: int = 40,
    timeout_s: float | None = None,
) -> Episode:
    d = get_domain(domain)
    spec = EpisodeSpec(
        domain=d,
        task=d.task(task) if task else d.tasks()[0],
        trial=0,
        seed=300,
        max_steps=max_steps,
        error_budget=ErrorBudget(max_errors=max_errors, counted=counted),  # type: ignore[arg-type]
        timeout_s=timeout_s,
    )
    return asyncio.run(run_episode(spec, agent, user or ScriptedUser(patience=100)))


def failed(ep: Episode) -> int:
    return sum(1 for m in ep.messages if m.tool_result is not None and m.tool_result.error)


def test_budget_ends_the_episode_when_the_count_reaches_max_errors() -> None:
    ep = run(Scripted([call("get_user", user_id="u1")]), max_errors=3)
    assert ep.termination_reason == TerminationReason.TOO_MANY_ERRORS
    assert failed(ep) == 3 and ep.metadata["failed_calls"] == 3
    assert ep.reward == 0.0
    assert ep.error_budget == ErrorBudget(max_errors=3, counted="all")
    assert ep.messages[-1].tool_result is not None
    assert ep.messages[-1].tool_result.text == "Error: Tool 'get_user' not found."


def test_errors_are_cumulative_and_never_reset() -> None:
    order = RETAIL.load_db().orders
    real = next(iter(order))
    turns = [
        call("get_order", order_id="nope"),
        call("get_order", order_id=real),
        call("get_order", order_id="nope"),
        text("ok"),
    ]
    ep = run(Scripted(turns), max_errors=2)
    assert ep.termination_reason == TerminationReason.TOO_MANY_ERRORS
    results = [m.tool_result for m in ep.messages if m.tool_result is not None]
    assert [r.error for r in results] == [True, False, True]


def test_user_errors_count_unless_only_agent_errors_are_counted() -> None:
    agent = Scripted([text("Please do it.")])
    ep = run(agent, domain="telecom", user=PhoneFumbler(), max_errors=2, max_steps=30)
    assert ep.termination_reason == TerminationReason.TOO_MANY_ERRORS
    user_results = [m.tool_result for m in ep.messages if m.tool_result is not None]
    assert all(r.requestor == "user" and r.error_kind == "unknown_tool" for r in user_results)
    ep = run(
        Scripted([text("Please do it.")]),
        domain="telecom",
        user=PhoneFumbler(),
        max_errors=2,
        counted="agent",
        max_steps=30,
    )
    assert ep.termination_reason == TerminationReason.MAX_STEPS
    assert ep.metadata["failed_calls"] == 0 and failed(ep) > 2


def test_no_budget_means_no_limit() -> None:
    ep = run(Scripted([call("nope")]), max_errors=None, max_steps=25)
    assert ep.termination_reason == TerminationReason.MAX_STEPS
    assert ep.metadata["steps"] == 25 and failed(ep) == 12


def test_max_steps_counts_every_message_after_the_greeting() -> None:
    ep = run(Scripted([text("Sorry.")]), max_steps=7)
    assert ep.termination_reason == TerminationReason.MAX_STEPS
    assert len(ep.messages) == 1 + 7


def test_malformed_output_goes_to_the_user_and_is_not_a_failed_call() -> None:
    bad = Message(
        role="assistant",
        content='<tool_call>{"name": "get_order", ',
        malformed=True,
        tool_calls=[ToolCall(id="z", name="get_order", arguments={"order_id": "W1"})],
    )
    ep = run(Scripted([bad, text("###STOP###")]), max_errors=1)
    assert ep.termination_reason == TerminationReason.AGENT_STOP
    assert not any(m.tool_result for m in ep.messages)
    malformed = ep.messages[2]
    assert malformed.malformed and malformed.tool_calls == []
    # the user answered the malformed turn as text
    assert ep.messages[3].role == "user"


def test_agent_stop_is_rewardable_and_evaluated() -> None:
    ep = run(Scripted([text(f"Bye {STOP}")]))
    assert ep.termination_reason == TerminationReason.AGENT_STOP
    assert ep.reward == 0.0 and ep.reward_breakdown["communicate"] == 0.0


def test_reward_needs_a_rewardable_ending() -> None:
    task = RETAIL.task("status_00")
    get_order = task.actions[1]
    # The right facts are said, then the agent keeps failing until the budget ends it.
    turns = [text(task.final_message), call(get_order.name, order_id="bad")]
    ep = run(Scripted(turns), task="status_00", user=Patient(), max_errors=1)
    assert ep.termination_reason == TerminationReason.TOO_MANY_ERRORS
    assert ep.reward_breakdown == {"db": 1.0, "env_assertions": 1.0, "communicate": 1.0}
    assert ep.reward == 0.0


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (RuntimeError("boom"), TerminationReason.AGENT_ERROR),
        (BackendError("down", kind="connection"), TerminationReason.INFRASTRUCTURE_ERROR),
        (ContextWindowExceeded("too long"), TerminationReason.CONTEXT_WINDOW_EXCEEDED),
    ],
)
def test_agent_exceptions(exc: Exception, reason: TerminationReason) -> None:
    ep = run(Raising(exc))
    assert ep.termination_reason == reason and ep.reward == 0.0
    assert str(exc) in ep.metadata["error"]


class RaisingUser(Opener):
    """Opens normally, then fails on its second turn (after the agent's first reply)."""

    opening = "Where is my order?"

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def later(self, messages: list[Message]) -> Message:
        raise self.exc


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (RuntimeError("user boom"), TerminationReason.USER_ERROR),
        (BackendError("user down", kind="connection"), TerminationReason.INFRASTRUCTURE_ERROR),
        (ContextWindowExceeded("user too long"), TerminationReason.CONTEXT_WINDOW_EXCEEDED),
    ],
)
def test_user_exceptions_are_the_users_not_the_agents(
    exc: Exception, reason: TerminationReason
) -> None:
    ep = run(Scripted([text("Let me check.")]), user=RaisingUser(exc))
    assert ep.termination_reason == reason and ep.reward == 0.0
    assert ep.metadata["error"].startswith("user: ") and str(exc) in ep.metadata["error"]
    assert [m.role for m in ep.messages] == ["assistant", "user", "assistant"]


def test_timeout() -> None:
    ep = run(Sleeping(), timeout_s=0.2)
    assert ep.termination_reason == TerminationReason.TIMEOUT


def test_call_ids_are_unique_and_results_pair_up() -> None:
    ep = run(Scripted([call("nope"), call("nope"), text(STOP)]))
    ids = [c.id for m in ep.messages for c in m.tool_calls]
    assert len(ids) == len(set(ids)) == 2 and all(ids)
    assert list(ep.tool_results()) == ids
    assert all(c.requestor == "agent" for m in ep.messages for c in m.tool_calls)


def test_each_side_sees_only_its_own_tool_traffic() -> None:
    ep = run(
        Scripted(
            [call("get_plans"), text("Please check the status bar on your phone."), text(STOP)]
        ),
        domain="telecom",
        task="airplane_00",
    )
    roles = [
        (m.role, bool(m.tool_calls), m.tool_result.requestor if m.tool_result else None)
        for m in ep.messages
    ]
    assert ("user", True, None) in roles and ("tool", False, "user") in roles
    view = agent_view(ep.messages, TELECOM.policy)
    assert view[0].role == "system" and view[0].content == TELECOM.policy
    assert not any(m.role == "user" and m.tool_calls for m in view)
    assert all(m.tool_result.requestor == "agent" for m in view if m.tool_result)
    uview = user_view(ep.messages)
    assert not any(m.role == "assistant" and m.tool_calls for m in uview)
    assert all(m.tool_result.requestor == "user" for m in uview if m.tool_result)


def test_episode_fields() -> None:
    ep = run(Scripted([text(STOP)]), domain="telecom")
    assert ep.tools.agent == TELECOM.agent_toolkit.tool_names()
    assert "set_airplane_mode" in ep.tools.user and ep.tools.source == "run"
    assert ep.domain == "telecom" and ep.split == TELECOM.tasks()[0].split
    assert ep.model == "script" and ep.seed == 300 and ep.timing.duration_s is not None
    assert ep.messages[0].content == "Hi! How can I help you today?"
