"""The episode loop: agent ⇄ user ⇄ environment until a termination reason, τ²-style.

Semantics (documented in docs/domains.md):
- The conversation opens with a fixed agent greeting; the user speaks next.
- **Steps**: every message after the greeting (agent turns, user turns, tool results) is one
  step; reaching `max_steps` ends the episode with `max_steps`.
- **Routing**: an agent turn with tool calls goes to the environment (all calls, in order)
  and the agent speaks again; a malformed agent turn or a text turn goes to the user. A user
  turn with tool calls runs them on the user's device and the user speaks again.
- **Error budget**: every failed tool call (agent and user calls when `counted == "all"`, the
  default, like τ²; only agent calls when `"agent"`) adds one to a cumulative count that is
  never reset. When the count reaches `max_errors` (checked after each batch of calls) the
  episode ends `too_many_errors`. Malformed output is not a failed call.
- **Stops**: a user stop token (`###STOP###` etc.) ends `user_stop`; an agent text containing
  `###STOP###` ends `agent_stop`; an exception in the agent/user ends `agent_error` /
  `user_error` (a backend failure: `infrastructure_error`, or `context_window_exceeded`); a
  wall-clock limit ends `timeout`.
- **Middleware**: messages an agent returns from `take_injected()` (repair instructions,
  `role="system"`) are logged just before its reply; they are not steps and are in neither
  view.
- **Reward**: only `user_stop` / `agent_stop` can earn reward (τ²); the breakdown (db,
  env_assertions, communicate) is recorded for every episode.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from flatscore import defaults
from flatscore.agents.base import Agent
from flatscore.domains.framework import Domain, Environment, Task
from flatscore.episode import (
    REWARDABLE_TERMINATIONS,
    Episode,
    ErrorBudget,
    Message,
    TerminationReason,
    Timing,
    TokenUsage,
    ToolCall,
    make_episode_id,
)
from flatscore.models.base import BackendError, ContextWindowExceeded
from flatscore.run.views import agent_view, user_view
from flatscore.users.base import STOP, User, is_stop

GREETING = "Hi! How can I help you today?"


@dataclass
class EpisodeSpec:
    """Everything that identifies and bounds one episode."""

    domain: Domain[Any]
    task: Task
    trial: int
    seed: int
    study: str = defaults.QUICK_STUDY_NAME
    arm: str = "default"
    max_steps: int = defaults.MAX_STEPS
    error_budget: ErrorBudget = field(
        default_factory=lambda: ErrorBudget(
            max_errors=defaults.MAX_ERRORS, counted=defaults.COUNTED
        )
    )
    timeout_s: float | None = None

    @property
    def episode_id(self) -> str:
        return make_episode_id(self.study, self.arm, self.domain.name, self.task.id, self.trial)


def _failure_reason(exc: Exception, default: TerminationReason) -> TerminationReason:
    """Backend failures are infrastructure, not the agent's (or user's) fault."""
    if isinstance(exc, ContextWindowExceeded):
        return TerminationReason.CONTEXT_WINDOW_EXCEEDED
    if isinstance(exc, BackendError):
        return TerminationReason.INFRASTRUCTURE_ERROR
    return default


class _Loop:
    def __init__(self, spec: EpisodeSpec, agent: Agent, user: User) -> None:
        self.spec = spec
        self.agent = agent
        self.user = user
        self.env: Environment = spec.domain.new_environment(spec.task)
        self.messages: list[Message] = [Message(role="assistant", content=GREETING)]
        self.steps = 0
        self.errors = 0
        self.call_ids: set[str] = set()
        self.metadata: dict[str, Any] = {}

    def goal_reached(self) -> bool:
        return self.spec.domain.solved(self.spec.task, self.env, self.messages)

    def _append(self, message: Message) -> None:
        self.messages.append(message)
        self.steps += 1

    def _normalise_calls(self, calls: list[ToolCall], requestor: str) -> list[ToolCall]:
        """Unique, non-empty call ids and the right requestor, so results pair up."""
        fixed = []
        for call in calls:
            call_id = call.id
            if not call_id or call_id in self.call_ids:
                call_id = f"call_{len(self.call_ids)}_{self.steps}"
            self.call_ids.add(call_id)
            fixed.append(call.model_copy(update={"id": call_id, "requestor": requestor}))
        return fixed

    def _execute(self, calls: list[ToolCall]) -> TerminationReason | None:
        budget = self.spec.error_budget
        for call in calls:
            result = self.env.execute(call)
            self._append(Message(role="tool", tool_result=result))
            if result.error and (budget.counted == "all" or result.requestor == "agent"):
                self.errors += 1
        if budget.max_errors is not None and self.errors >= budget.max_errors:
            return TerminationReason.TOO_MANY_ERRORS
        return None

    async def _user_turn(self) -> tuple[TerminationReason | None, bool]:
        """Returns (termination, whether the user speaks again)."""
        tools = self.spec.domain.user_tool_schemas()
        try:
            msg = await self.user.act(user_view(self.messages), tools)
        except Exception as exc:
            self.metadata["error"] = f"user: {type(exc).__name__}: {exc}"
            return _failure_reason(exc, TerminationReason.USER_ERROR), False
        calls = self._normalise_calls(msg.tool_calls, "user")
        msg = msg.model_copy(update={"role": "user", "tool_calls": calls})
        self._append(msg)
        if calls:
            return self._execute(calls), True
        if is_stop(msg.content):
            return TerminationReason.USER_STOP, False
        return None, False

    async def _agent_turn(self) -> tuple[TerminationReason | None, bool]:
        """Returns (termination, whether the agent speaks again)."""
        view = agent_view(self.messages, self.spec.domain.policy)
        started = time.perf_counter()
        try:
            msg = await self.agent.act(view, self.spec.domain.agent_tool_schemas())
        except Exception as exc:
            self.metadata["error"] = f"agent: {type(exc).__name__}: {exc}"
            return _failure_reason(exc, TerminationReason.AGENT_ERROR), False
        latency = msg.latency_s if msg.latency_s is not None else time.perf_counter() - started
        for injected in self.agent.take_injected():
            self.messages.append(injected)  # middleware turns: logged, not a step
        calls = [] if msg.malformed else self._normalise_calls(msg.tool_calls, "agent")
        msg = msg.model_copy(
            update={"role": "assistant", "tool_calls": calls, "latency_s": latency}
        )
        self._append(msg)
        if calls:
            return self._execute(calls), True
        if not msg.malformed and msg.content and STOP in msg.content:
            return TerminationReason.AGENT_STOP, False
        return None, False

    async def run(self) -> TerminationReason:
        self.agent.start(self.spec.task, self.spec.seed)
        self.user.start(self.spec.task, self.spec.seed, self.goal_reached)
        speaker = "user"
        while True:
            if self.steps >= self.spec.max_steps:
                return TerminationReason.MAX_STEPS
            if speaker == "user":
                reason, again = await self._user_turn()
                speaker = "user" if again else "agent"
            else:
                reason, again = await self._agent_turn()
                speaker = "agent" if again else "user"
            if reason is not None:
                return reason


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


async def run_episode(spec: EpisodeSpec, agent: Agent, user: User) -> Episode:
    """Run one episode to its end and return it (evaluated, with timing)."""
    loop = _Loop(spec, agent, user)
    started_at, t0 = _now(), time.perf_counter()
    try:
        if spec.timeout_s is not None:
            reason = await asyncio.wait_for(loop.run(), spec.timeout_s)
        else:
            reason = await loop.run()
    except TimeoutError:
        reason = TerminationReason.TIMEOUT
    evaluation = spec.domain.evaluate(spec.task, loop.env, loop.messages)
    reward = evaluation.reward if reason in REWARDABLE_TERMINATIONS else 0.0
    usage = TokenUsage()
    for m in loop.messages:
        if m.usage is not None:
            usage = usage + m.usage
    return Episode(
        episode_id=spec.episode_id,
        study=spec.study,
        arm=spec.arm,
        model=agent.name,
        domain=spec.domain.name,
        task_id=spec.task.id,
        trial=spec.trial,
        seed=spec.seed,
        split=spec.task.split,
        messages=loop.messages,
        termination_reason=reason,
        reward=reward,
        reward_breakdown=evaluation.breakdown,
        error_budget=spec.error_budget,
        tools=spec.domain.tool_lists(),
        timing=Timing(started_at=started_at, ended_at=_now(), duration_s=time.perf_counter() - t0),
        usage=usage,
        serving=agent.serving(),
        metadata={
            "user": user.name,
            "template": spec.task.template,
            "failed_calls": loop.errors,
            "steps": loop.steps,
            "max_steps": spec.max_steps,
            **loop.metadata,
            **agent.episode_metadata(),
        },
    )
