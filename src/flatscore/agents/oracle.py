"""The oracle agent: performs a task's gold solution as a plausible conversation.

It asks for the information the task says it needs, calls the gold agent tools one per turn,
asks the user to perform the gold user (device) actions, then sends the task's final message
(which contains every `communicate` item). Its episodes are the training data of the embedded
model, so its phrasing is fixed and plain.

`slip_rate` > 0 makes a *training-data* oracle that sometimes makes a typical mistake before
a gold step and then does it right: a mistake of one of the analysis' channels
(`flatscore.agents.mistakes`: role confusion, near-miss or invented name, text in the name
slot, bad arguments, a record that does not exist, a refused precondition), followed by the
corrected call or a clarifying question. The slips are seeded by (seed, task); every slipped
call is checked to fail without side effects, so the episode still succeeds. Never use slips
in an evaluation run: failures at test time must be the model's own.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

from flatscore.agents.base import Agent, ToolSchema
from flatscore.agents.mistakes import MISTAKE_CHANNELS, Mistake, mistake_options, pick
from flatscore.domains import get_domain
from flatscore.domains.framework import Action, Environment, Task
from flatscore.episode import Message, ToolCall, ToolResult

ASK_PHRASES = {
    "email": "your email address",
    "first_name": "your first name",
    "last_name": "last name",
    "zip": "zip code",
    "phone_number": "your phone number",
    "name": "your name",
}
CLOSING = "Is there anything else I can help you with?"
SLIP_KINDS = MISTAKE_CHANNELS
NOT_FOUND = "I could not find that."


def ask_text(keys: list[str]) -> str:
    """`Could you please give me your first name, last name and zip code?`"""
    parts = [ASK_PHRASES.get(k, f"your {k.replace('_', ' ')}") for k in keys]
    joined = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"Could you please give me {joined}?"


def mistake_turns(mistake: Mistake, index: int) -> list[Message]:
    """The failing call (made `mistake.repeat` times: a small model retries what failed),
    and the clarifying question when the mistake asks again."""
    turns = []
    for attempt in range(mistake.repeat):
        suffix = "" if attempt == 0 else str(attempt + 1)
        call = mistake.call.model_copy(update={"id": f"call_{index}_slip{suffix}"})
        turns.append(Message(role="assistant", tool_calls=[call]))
    if mistake.ask:
        turns.append(Message(role="assistant", content=f"{NOT_FOUND} {ask_text(mistake.ask)}"))
    return turns


def oracle_plan(
    task: Task,
    *,
    slip_rate: float = 0.0,
    slip_kinds: tuple[str, ...] = SLIP_KINDS,
    rng: random.Random | None = None,
    mistakes: tuple[Mistake, ...] = (),
) -> list[Message]:
    """The oracle's turns for `task`, in order: with the given `mistakes`, and with seeded
    slips (from the same planter) before a gold action with probability `slip_rate`."""
    domain = get_domain(task.domain)
    rng = rng or random.Random(0)
    planted = {m.before: m for m in mistakes}
    plan: list[Message] = []
    for index, action in enumerate(task.actions):
        for ask in task.asks:
            if ask.before == index:
                plan.append(Message(role="assistant", content=ask_text(ask.keys)))
        slip = planted.get(index)
        if slip is None and slip_rate > 0 and rng.random() < slip_rate:
            slip = pick(mistake_options(domain, task, index, rng, slip_kinds), rng)
        if slip is not None:
            plan.extend(mistake_turns(slip, index))
        if action.requestor == "agent":
            call = ToolCall(id=f"call_{index}", name=action.name, arguments=dict(action.arguments))
            plan.append(Message(role="assistant", tool_calls=[call]))
        else:
            assert domain.user_toolkit is not None
            plan.append(Message(role="assistant", content=domain.user_toolkit.instruction(action)))
    if task.final_message:
        plan.append(Message(role="assistant", content=task.final_message))
    return plan


class OracleAgent(Agent):
    """Replays the gold solution; says a closing line once it has nothing left to do."""

    name = "oracle"

    def __init__(self, slip_rate: float = 0.0, slip_kinds: tuple[str, ...] = SLIP_KINDS) -> None:
        unknown = set(slip_kinds) - set(SLIP_KINDS)
        if unknown or not 0.0 <= slip_rate <= 1.0:
            raise ValueError(f"slip_rate must be in [0, 1] and slip_kinds in {SLIP_KINDS}")
        self.slip_rate = slip_rate
        self.slip_kinds = tuple(slip_kinds)
        self._plan: list[Message] = []
        self._next = 0

    def start(self, task: Task, seed: int) -> None:
        rng = random.Random(f"{seed}|slip|{task.domain}|{task.id}")
        self._plan = oracle_plan(
            task, slip_rate=self.slip_rate, slip_kinds=self.slip_kinds, rng=rng
        )
        self._next = 0

    async def act(self, messages: list[Message], tools: list[ToolSchema]) -> Message:
        if self._next < len(self._plan):
            self._next += 1
            return self._plan[self._next - 1].model_copy(deep=True)
        return Message(role="assistant", content=CLOSING)


# --------------------------------------------------------------------------- from a state


def _signature(env: Environment) -> str:
    """What the world looks like to the task's evaluation: the database and the device."""
    device = json.dumps(env.device_state(), sort_keys=True, default=str)
    return f"{env.db_hash()}|{device}"


def gold_progress(task: Task, env: Environment) -> int | None:
    """The fewest gold actions whose replay on a fresh world gives `env`'s world (database
    and device state): the gold actions before it are done. None when no prefix of the gold
    solution gives it (the episode made a write the solution does not make, or made its
    writes in another order)."""
    gold = get_domain(task.domain).new_environment(task)
    target = _signature(env)
    if _signature(gold) == target:
        return 0
    for done, action in enumerate(task.actions, 1):
        gold.apply(action)
        if _signature(gold) == target:
            return done
    return None


def _call_key(name: str, arguments: object) -> str:
    return f"{name}\x00{json.dumps(arguments, sort_keys=True, default=str)}"


def replay_world(task: Task, messages: Sequence[Message]) -> Environment:
    """The world after `messages`: every answered call (the agent's and the user's)
    executed again, in order, on a fresh environment. Each must fail or succeed as it did
    in the episode (the domains are deterministic); otherwise the transcript is not of
    this task (ValueError)."""
    env = get_domain(task.domain).new_environment(task)
    answers = _answers(messages)
    for m in messages:
        for call in m.tool_calls:
            recorded = answers.get((call.requestor, call.id))
            if recorded is None:
                continue
            if env.execute(call).error != recorded.error:
                raise ValueError(f"replaying {call.name} in {task.id} does not give its result")
    return env


def _answers(messages: Sequence[Message]) -> dict[tuple[str, str], ToolResult]:
    return {
        (m.tool_result.requestor, m.tool_result.call_id): m.tool_result
        for m in messages
        if m.tool_result is not None
    }


def _made(messages: Sequence[Message]) -> tuple[set[str], set[str]]:
    """The agent calls (name and arguments) and the user actions (names) that succeeded."""
    answers = _answers(messages)
    made: set[str] = set()
    user_made: set[str] = set()
    for m in messages:
        for call in m.tool_calls:
            result = answers.get((call.requestor, call.id))
            if result is None or result.error:
                continue
            if call.requestor == "user":
                user_made.add(call.name)
            else:
                made.add(_call_key(call.name, call.arguments))
    return made, user_made


def next_gold_step(task: Task, messages: Sequence[Message], *, off_path: bool = True) -> int | None:
    """The index of the gold action the oracle does next from the state after `messages`
    (`len(task.actions)`: none left), or None when there is none it can do.

    On the gold path (`gold_progress` of the replayed world): the first action after the
    done prefix that is not a read the conversation already made successfully (the same
    call from the agent, or the user's device action). Off it (a write the solution does
    not make, or writes in another order), with `off_path`: the first action the
    conversation has not made successfully, if it still succeeds on the world as it is
    (tried on a copy); the oracle knows no other way."""
    domain = get_domain(task.domain)
    made, user_made = _made(messages)

    def was_made(action: Action) -> bool:
        if action.requestor == "user":
            return action.name in user_made
        return _call_key(action.name, action.arguments) in made

    done = gold_progress(task, replay_world(task, messages))
    if done is None:
        if not off_path:
            return None
        step = next((i for i, a in enumerate(task.actions) if not was_made(a)), None)
        if step is None:
            return len(task.actions)
        action = task.actions[step]
        trial = ToolCall(
            id="try", name=action.name, arguments=action.arguments, requestor=action.requestor
        )
        return None if replay_world(task, messages).execute(trial).error else step
    step = done
    while step < len(task.actions):
        action = task.actions[step]
        if domain.tool_kind(action) != "read" or not was_made(action):
            break
        step += 1
    return step


def oracle_next_turn(
    task: Task, messages: Sequence[Message], *, off_path: bool = True
) -> Message | None:
    """The oracle's next turn from any state of an episode (`messages`: the transcript so
    far, both sides); None when there is no gold action it can do (`next_gold_step`).

    Before the next gold action, the oracle asks for what the task says it must ask for
    (`task.asks`) if the user has not said those values yet — after a record that was not
    found, with `NOT_FOUND` first. A gold agent call is made with the gold arguments, a
    user action asked of the user (`UserToolkit.instruction`); with nothing left, the
    final message (once), then the closing line."""
    domain = get_domain(task.domain)
    step = next_gold_step(task, messages, off_path=off_path)
    if step is None:
        return None
    heard = " ".join((m.content or "").lower() for m in messages if m.role == "user")
    known = task.scenario.known_info
    for ask in task.asks:
        missing = [k for k in ask.keys if k in known and known[k].lower() not in heard]
        if ask.before <= step and missing:
            last = next((m.tool_result for m in reversed(messages) if m.role == "tool"), None)
            lost = last is not None and last.error_kind == "entity_not_found"
            text = ask_text(ask.keys)
            return Message(role="assistant", content=f"{NOT_FOUND} {text}" if lost else text)
    if step < len(task.actions):
        action = task.actions[step]
        if action.requestor == "user":
            assert domain.user_toolkit is not None
            return Message(role="assistant", content=domain.user_toolkit.instruction(action))
        call = ToolCall(id=f"call_{step}", name=action.name, arguments=dict(action.arguments))
        return Message(role="assistant", tool_calls=[call])
    said = {m.content for m in messages if m.role == "assistant" and m.content}
    if task.final_message and task.final_message not in said:
        return Message(role="assistant", content=task.final_message)
    return Message(role="assistant", content=CLOSING)
