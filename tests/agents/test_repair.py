"""The repair middleware on the real built-in domains, with a scripted agent that makes one
specific mistake (an agent like any other, registered only here)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import ValidationError

from flatscore.agents.base import Agent, ToolSchema, make_agent, register_agent
from flatscore.agents.oracle import oracle_plan
from flatscore.agents.repair import (
    RepairAgent,
    parse_channels,
    repair_arm_label,
)
from flatscore.domains import get_domain
from flatscore.domains.framework import Task
from flatscore.episode import Episode, ErrorBudget, Message, TerminationReason, ToolCall
from flatscore.errors import InputError
from flatscore.run.episode_loop import EpisodeSpec, run_episode
from flatscore.run.quick import QuickRun, run_quick
from flatscore.run.views import user_view
from flatscore.study import RepairConfig
from flatscore.users import make_user

Mistake = Literal["name", "args", "malformed"]


class MistakeAgent(Agent):
    """Plays the oracle's plan, but gets the tool calls numbered in `at` wrong (a wrong
    name, or wrong arguments). It fixes a wrong call when the last message it sees is a
    repair instruction (if `obeys`), else keeps repeating it. Records every view."""

    name = "mistaken"

    def __init__(
        self,
        mistake: Mistake = "name",
        wrong_name: str = "lookup_user",
        at: tuple[int, ...] = (0,),
        obeys: bool = True,
    ) -> None:
        self.mistake, self.wrong_name, self.at, self.obeys = mistake, wrong_name, at, obeys
        self.seen: list[list[Message]] = []

    def start(self, task: Task, seed: int) -> None:
        self.plan = oracle_plan(task)
        self.next = 0
        self.calls_done = 0
        self.seen = []

    def _wrong(self, right: ToolCall) -> Message:
        if self.mistake == "malformed":
            return Message(role="assistant", content='{"name": "find_', malformed=True)
        if self.mistake == "name":
            call = right.model_copy(update={"name": self.wrong_name})
        else:
            call = right.model_copy(update={"arguments": {"bogus": 1}})
        return Message(role="assistant", tool_calls=[call])

    async def act(self, messages: list[Message], tools: list[ToolSchema]) -> Message:
        self.seen.append(list(messages))
        if self.next >= len(self.plan):
            return Message(role="assistant", content="Anything else?")
        turn = self.plan[self.next]
        if turn.tool_calls and self.calls_done in self.at:
            told = messages[-1].repair
            if not (told and self.obeys):
                return self._wrong(turn.tool_calls[0])
        if turn.tool_calls:
            self.calls_done += 1
        self.next += 1
        return turn.model_copy(deep=True)


register_agent("mistaken", MistakeAgent)


def _run(
    domain: str,
    task_id: str,
    agent: Agent,
    max_errors: int = 6,
) -> Episode:
    d = get_domain(domain)
    spec = EpisodeSpec(
        domain=d,
        task=d.task(task_id),
        trial=0,
        seed=300,
        error_budget=ErrorBudget(max_errors=max_errors),
    )
    return asyncio.run(run_episode(spec, agent, make_user("scripted")))


def _instructions(agent: MistakeAgent) -> list[Message]:
    """The distinct repair instructions the inner agent was shown, in order."""
    seen: dict[int, Message] = {}
    for view in agent.seen:
        for m in view:
            if m.repair:
                seen.setdefault(id(m), m)
    return list(seen.values())


def test_repair_fixes_a_hallucinated_tool_name() -> None:
    inner = MistakeAgent("name")
    repaired = _run("retail", "cancel_00", RepairAgent(inner))
    assert repaired.succeeded
    assert repaired.metadata["failed_calls"] == 1
    [instruction] = _instructions(inner)
    assert instruction.role == "system"
    assert "`lookup_user` failed" in (instruction.content or "")
    assert "find_user_by_email" in (instruction.content or "")  # the valid names are listed
    assert "Error: Tool 'lookup_user' not found." in (instruction.content or "")

    bare = MistakeAgent("name")
    unrepaired = _run("retail", "cancel_00", bare)
    assert unrepaired.termination_reason == TerminationReason.TOO_MANY_ERRORS
    assert not unrepaired.succeeded
    assert _instructions(bare) == []


def test_role_confusion_counts_as_unknown_tool() -> None:
    """Calling the user's phone tool from the agent side: `role_confusion`, repaired by
    default, with the hint that it is the customer's tool."""
    inner = MistakeAgent("name", wrong_name="set_airplane_mode")
    episode = _run("telecom", "suspended_00", RepairAgent(inner))
    assert episode.succeeded
    [instruction] = _instructions(inner)
    assert "customer uses on their own device" in (instruction.content or "")


def test_repair_triggers_only_on_configured_channels() -> None:
    args_default = MistakeAgent("args", obeys=True)
    episode = _run("retail", "cancel_00", RepairAgent(args_default))
    assert _instructions(args_default) == []  # bad_arguments is not repaired by default
    assert episode.termination_reason == TerminationReason.TOO_MANY_ERRORS

    args_configured = MistakeAgent("args")
    agent = RepairAgent(args_configured, RepairConfig(channels=["bad_arguments"]))
    assert _run("retail", "cancel_00", agent).succeeded
    assert len(_instructions(args_configured)) == 1

    name_not_configured = MistakeAgent("name")
    agent = RepairAgent(name_not_configured, RepairConfig(channels=["bad_arguments"]))
    _run("retail", "cancel_00", agent)
    assert _instructions(name_not_configured) == []

    invented_only = MistakeAgent("name", wrong_name="set_airplane_mode")  # role confusion
    agent = RepairAgent(invented_only, RepairConfig(channels=["invented"]))
    _run("telecom", "suspended_00", agent)
    assert _instructions(invented_only) == []


def test_malformed_output_channel() -> None:
    plain = MistakeAgent("malformed")
    _run("retail", "cancel_00", RepairAgent(plain))
    assert _instructions(plain) == []  # not a configured channel by default

    inner = MistakeAgent("malformed")
    agent = RepairAgent(inner, RepairConfig(channels=["malformed_output"]))
    episode = _run("retail", "cancel_00", agent)
    assert episode.succeeded
    [instruction] = _instructions(inner)
    assert "your last reply failed: your reply could not be read" in (instruction.content or "")


@pytest.mark.parametrize("attempts", [1, 3])
def test_attempt_limit_per_failure(attempts: int) -> None:
    inner = MistakeAgent("name", obeys=False)  # ignores every instruction
    agent = RepairAgent(inner, RepairConfig(attempts=attempts))
    episode = _run("retail", "cancel_00", agent, max_errors=8)
    assert episode.metadata["failed_calls"] == 8
    given = _instructions(inner)
    assert [m.content.split(")")[0] for m in given if m.content] == [
        f"Repair (attempt {k} of {attempts}" for k in range(1, attempts + 1)
    ]
    meta = agent.episode_metadata()["repair"]
    assert meta["instructions"] == attempts
    assert meta["failure_chains"] == 1 and meta["exhausted_chains"] == 1
    # The inner agent's view only grows: each view extends the previous one.
    for before, after in zip(inner.seen, inner.seen[1:], strict=False):
        assert after[: len(before)] == before


def test_each_new_failure_gets_its_own_attempts() -> None:
    inner = MistakeAgent("name", at=(0, 1))  # the first two calls go wrong, each fixed
    agent = RepairAgent(inner, RepairConfig(attempts=1))
    episode = _run("retail", "cancel_00", agent)
    assert episode.succeeded
    assert agent.episode_metadata()["repair"]["instructions"] == 2
    assert agent.episode_metadata()["repair"]["failure_chains"] == 2


def test_config_validation_and_helpers() -> None:
    with pytest.raises(ValidationError, match="unknown repair channel"):
        RepairConfig(channels=["nonsense"])
    with pytest.raises(ValidationError):
        RepairConfig(attempts=0)
    assert RepairConfig(channels=parse_channels(" unknown_tool, bad_arguments ,")).channels == [
        "unknown_tool",
        "bad_arguments",
    ]
    with pytest.raises(InputError, match="unknown repair channel") as err:
        QuickRun.parse(repair={"mode": "on", "channels": parse_channels("unknown_tool,typo")})
    assert err.value.field == "--repair-channels"
    with pytest.raises(InputError) as err:
        QuickRun.parse(repair={"mode": "on", "attempts": 0})
    assert err.value.field == "--repair-attempts"
    assert repair_arm_label("int4") == "int4+repair" == repair_arm_label("int4+repair")


def test_repair_turns_are_logged_and_marked() -> None:
    inner = MistakeAgent("name", obeys=False)
    agent = RepairAgent(inner, RepairConfig(attempts=2))
    episode = _run("retail", "cancel_00", agent, max_errors=4)
    repairs = [i for i, m in enumerate(episode.messages) if m.repair]
    assert len(repairs) == 2
    for i in repairs:
        m = episode.messages[i]
        assert m.role == "system"
        # right after the failing call's result, right before the agent's next turn
        assert episode.messages[i - 1].role == "tool" and episode.messages[i - 1].tool_result.error  # type: ignore[union-attr]
        assert episode.messages[i + 1].role == "assistant"
    assert episode.metadata["repair"] == {
        "enabled": True,
        "channels": ["unknown_tool"],
        "attempts": 2,
        "instructions": 2,
        "failure_chains": 1,
        "exhausted_chains": 1,
    }
    assert not any(m.repair for m in user_view(episode.messages))  # the user never sees them
    assert Episode.model_validate_json(episode.model_dump_json()) == episode

    plain = _run("retail", "cancel_00", MistakeAgent("name", obeys=False), max_errors=4)
    assert "repair" not in plain.metadata and not any(m.repair for m in plain.messages)


def test_repair_runs_are_visible_to_the_analysis(tmp_path: Path) -> None:
    """A small study on the real runner: the scripted agent without its mistake as the
    reference arm, with it as the 'quantized' arm, each with and without repair. The
    analysis keeps the four arms apart and measures the repair effect and interaction."""
    from flatscore.analysis.analyze import AnalysisOptions, analyze
    from flatscore.analysis.repair_effect import repair_effects
    from flatscore.analysis.settings import AnalysisSettings

    path = tmp_path / "study.jsonl"
    tasks = [t.id for t in get_domain("retail").tasks("test")[:3]]

    def go(arm: str, at: tuple[int, ...], repair: bool) -> None:
        quick = QuickRun.parse(
            agent="mistaken",
            agent_options={"at": at},
            domains=["retail"],
            study="s",
            arm=arm,
            repair=repair,
            task_ids=tasks,
            max_errors=5,
        )
        run_quick(quick, path, resume=True, progress=False)

    for repair in (False, True):
        go("bf16", (), repair)  # the same agent without its mistake: the reference
        go("int4", (0,), repair)
    from flatscore.store.jsonl import read_episodes

    episodes = list(read_episodes(path))
    assert len(episodes) == 12
    effect = repair_effects(episodes, AnalysisSettings(bootstrap=200))
    [cell] = effect.cells
    ref, q = cell.arms
    assert (cell.reference, ref.arm, q.arm) == ("bf16", "bf16", "int4")
    assert ref.effect.value == 0 and ref.repair_instructions == 0
    assert q.effect.value == 1.0 and q.repair_instructions == 3 and q.episodes_repaired == 3
    assert q.interaction is not None and q.interaction.value == 1.0
    assert q.repair_config == {"channels": ["unknown_tool"], "attempts": 3}
    result = analyze(episodes, AnalysisOptions(bootstrap=200))
    arms = {a.arm: a for a in result.cells[0].arms}
    assert set(arms) == {"bf16", "bf16+repair", "int4", "int4+repair"}
    assert arms["int4+repair"].channels["unknown_tool"].count == 3  # one failure per task
    assert arms["int4"].channels["unknown_tool"].count == 15  # budget of 5, three tasks


def test_start_raises_a_broken_domain_and_tolerates_an_unknown_one() -> None:
    """Only a domain flatscore does not know goes without a user tool list; a registered
    domain that fails to load is an error, not silently 'no user tools'."""
    from flatscore.domains import DOMAINS

    def broken() -> Any:
        raise RuntimeError("db.json is corrupt")

    task = get_domain("retail").task("cancel_00")
    agent = RepairAgent(make_agent("noop"), RepairConfig())  # noop needs no domain itself
    agent.start(task.model_copy(update={"domain": "not-registered"}), 300)
    assert agent._user_tools == frozenset()
    DOMAINS.register("broken-test-domain", broken)
    try:
        with pytest.raises(RuntimeError, match="corrupt"):
            agent.start(task.model_copy(update={"domain": "broken-test-domain"}), 300)
    finally:
        DOMAINS.unregister("broken-test-domain")
    assert "broken-test-domain" not in DOMAINS
