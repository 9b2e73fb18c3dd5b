"""A real telecom episode (the runner's episode loop, the real environment, the scripted
user) in which the agent calls one of the user's phone tools by the name its policy
guides the user with, and the analysis counts that call as `role_confusion` (issue 28)."""

from __future__ import annotations

import asyncio
import re

from flatscore.agents.base import Agent, ToolSchema
from flatscore.analysis.channels import load_rules
from flatscore.analysis.facts import episode_facts
from flatscore.domains import get_domain
from flatscore.domains.framework import Action
from flatscore.episode import Message, ToolCall
from flatscore.run.episode_loop import EpisodeSpec, run_episode
from flatscore.users import ScriptedUser

TELECOM = get_domain("telecom")


class PolicyEcho(Agent):
    """Asks for the status bar, then calls the airplane-mode tool its policy names itself
    (the study's 4-bit mistake), then guides the user to it as the policy says."""

    name = "policy-echo"

    def __init__(self) -> None:
        self.turn = 0
        self.named = ""

    async def act(self, messages: list[Message], tools: list[ToolSchema]) -> Message:
        self.turn += 1
        if self.turn == 1:
            return Message(
                role="assistant", content="Please check the status bar with `check_status()`."
            )
        if self.turn == 2:
            policy = messages[0].content or ""
            self.named = re.findall(r"`(\w*airplane\w*)\(", policy)[0]
            assert self.named not in {t["function"]["name"] for t in tools}
            call = ToolCall(id="", name=self.named, arguments={"on": False})
            return Message(role="assistant", tool_calls=[call])
        if self.turn == 3:
            action = Action(name=self.named, arguments={"on": False}, requestor="user")
            return Message(role="assistant", content=TELECOM.user_toolkit.instruction(action))  # type: ignore[union-attr]
        return Message(role="assistant", content="Is there anything else I can help you with?")


def test_an_agent_calling_the_users_tool_by_name_is_role_confusion() -> None:
    task = TELECOM.task("airplane_00")
    spec = EpisodeSpec(domain=TELECOM, task=task, trial=0, seed=300, study="s", arm="ref")
    agent = PolicyEcho()
    episode = asyncio.run(run_episode(spec, agent, ScriptedUser()))

    assert agent.named == "set_airplane_mode"
    [failed] = [m.tool_result for m in episode.messages if m.tool_result and m.tool_result.error]
    assert failed.requestor == "agent"
    assert failed.text == "Error: Tool 'set_airplane_mode' not found."
    # the user then did it on the phone, as the agent guided: a user call, not an agent one
    user_calls = [c.name for m in episode.messages for c in m.tool_calls if c.requestor == "user"]
    assert user_calls[:2] == ["check_status", "set_airplane_mode"]

    facts = episode_facts(episode, load_rules())
    assert facts.agent_calls == 1 and facts.agent_failed == 1
    assert facts.channels["role_confusion"] == 1
    assert sum(facts.channels.values()) == 1
    assert facts.hallucinated == {"set_airplane_mode": 1}
    assert facts.user_calls == 2 and facts.user_failed == 0
