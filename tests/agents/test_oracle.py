"""The oracle solves every task with the scripted user; the plan is the gold solution."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from flatscore.agents import OracleAgent, agent_names, make_agent
from flatscore.agents.oracle import ask_text, oracle_plan
from flatscore.domains import get_domain
from flatscore.episode import Episode, TerminationReason
from flatscore.run.episode_loop import EpisodeSpec, run_episode
from flatscore.users import make_user
from task_slices import EVERY_TASK


def _run(domain: str, agent: str, seed: int = 300, stride: int = 1) -> list[Episode]:
    d = get_domain(domain)

    async def all_tasks() -> list[Episode]:
        return [
            await run_episode(
                EpisodeSpec(domain=d, task=t, trial=0, seed=seed),
                make_agent(agent),
                make_user("scripted"),
            )
            for t in d.tasks()[::stride]
        ]

    return asyncio.run(all_tasks())


@pytest.mark.parametrize(("domain", "stride"), EVERY_TASK)
def test_oracle_succeeds_on_every_task(domain: str, stride: int) -> None:
    episodes = _run(domain, "oracle", stride=stride)
    failed = [
        (e.task_id, e.termination_reason, e.reward_breakdown) for e in episodes if not e.succeeded
    ]
    assert failed == []
    assert all(e.termination_reason == TerminationReason.USER_STOP for e in episodes)
    assert all(e.metadata["failed_calls"] == 0 for e in episodes)
    assert max(e.metadata["steps"] for e in episodes) < 30  # well inside the default 40


def test_oracle_succeeds_with_other_seeds_too() -> None:
    assert all(e.succeeded for e in _run("telecom", "oracle", seed=7))


def test_oracle_plan_follows_the_gold_actions() -> None:
    task = get_domain("telecom").task("suspended_00")
    plan = oracle_plan(task)
    calls = [m.tool_calls[0].name for m in plan if m.tool_calls]
    assert calls == [a.name for a in task.actions if a.requestor == "agent"]
    texts = [m.content for m in plan if m.content]
    assert texts[0].startswith("Please check the status bar")
    assert texts[1] == "Could you please give me your phone number?"
    assert texts[-1] == task.final_message


def test_ask_text() -> None:
    assert ask_text(["email"]) == "Could you please give me your email address?"
    assert ask_text(["first_name", "last_name", "zip"]) == (
        "Could you please give me your first name, last name and zip code?"
    )


def test_registry() -> None:
    assert {"oracle", "noop"} <= set(agent_names())
    assert isinstance(make_agent("oracle"), OracleAgent)
    with pytest.raises(KeyError, match="unknown agent 'gpt'"):
        make_agent("gpt")


@pytest.mark.parametrize(("domain", "stride"), EVERY_TASK)
def test_slips_fail_then_recover_and_the_episode_still_succeeds(domain: str, stride: int) -> None:
    d = get_domain(domain)

    async def all_tasks() -> list[Episode]:
        return [
            await run_episode(
                EpisodeSpec(domain=d, task=t, trial=0, seed=300),
                make_agent("oracle", slip_rate=0.5),
                make_user("scripted"),
            )
            for t in d.tasks()[::stride]
        ]

    episodes = asyncio.run(all_tasks())
    assert all(e.succeeded for e in episodes)
    kinds = Counter(
        m.tool_result.error_kind
        for e in episodes
        for m in e.messages
        if m.tool_result is not None and m.tool_result.error
    )
    assert sum(kinds.values()) >= len(episodes) // 2
    expected = {"unknown_tool", "bad_arguments", "entity_not_found"}
    assert expected <= set(kinds)
    if domain == "telecom":
        user_tools = set(d.tool_lists().user)
        confused = [
            c.name
            for e in episodes
            for m in e.messages
            for c in m.tool_calls
            if c.requestor == "agent" and c.name in user_tools
        ]
        assert confused  # role confusion: the agent called a phone tool itself


def test_slip_option_is_validated() -> None:
    with pytest.raises(ValueError, match="slip_rate"):
        OracleAgent(slip_rate=2.0)
    with pytest.raises(ValueError, match="slip_kinds"):
        OracleAgent(slip_kinds=("typo",))
