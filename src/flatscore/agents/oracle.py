"""The oracle agent: performs a task's gold solution as a plausible conversation.

It asks for the information the task says it needs, calls the gold agent tools one per turn,
asks the user to perform the gold user (device) actions, then sends the task's final message
(which contains every `communicate` item). Its episodes are the training data of the embedded
model, so its phrasing is fixed and plain.

`slip_rate` > 0 makes a *training-data* oracle that sometimes makes a typical mistake before
a gold step and then does it right — an invented tool name, a user-side (phone) tool called
by the agent (role confusion), a missing argument, or an id that does not exist — so a model
trained on its episodes sees recoveries. The slips are seeded by (seed, task); every slipped
call fails without side effects, so the episode still succeeds. Never use slips in an
evaluation run: failures at test time must be the model's own.
"""

from __future__ import annotations

import random
import re

from flatscore.agents.base import Agent, ToolSchema
from flatscore.domains import get_domain
from flatscore.domains.framework import Action, Task
from flatscore.episode import Message, ToolCall

ASK_PHRASES = {
    "email": "your email address",
    "first_name": "your first name",
    "last_name": "last name",
    "zip": "zip code",
    "phone_number": "your phone number",
    "name": "your name",
}
CLOSING = "Is there anything else I can help you with?"
SLIP_KINDS = ("invented", "role_confusion", "bad_arguments", "entity_not_found")


def ask_text(keys: list[str]) -> str:
    """`Could you please give me your first name, last name and zip code?`"""
    parts = [ASK_PHRASES.get(k, f"your {k.replace('_', ' ')}") for k in keys]
    joined = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"Could you please give me {joined}?"


def _invented_name(name: str, rng: random.Random) -> str:
    options = [f"{name}_details", f"{name}s" if not name.endswith("s") else f"{name}_all"]
    if name.startswith("get_"):
        options.append("fetch_" + name[4:])
    if name.startswith("find_"):
        options.append(name.split("_by_")[0])
    return rng.choice(options)


def _missing_id(value: str) -> str:
    """A value that names no record: ids lose their letter prefix, anything else grows a 0."""
    return value[1:] if re.fullmatch(r"[A-Z]\d+", value) else value + "0"


def _slip(action: Action, kinds: list[str], rng: random.Random, ident: str) -> ToolCall | None:
    """A failing call made before `action`, or None when no slip of `kinds` applies."""
    strings = [k for k, v in action.arguments.items() if isinstance(v, str)]
    usable = [
        k
        for k in kinds
        if (k == "role_confusion") == (action.requestor == "user")
        and (k not in ("bad_arguments", "entity_not_found") or strings)
    ]
    if not usable:
        return None
    kind = rng.choice(usable)
    args = dict(action.arguments)
    name = action.name
    if kind == "invented":
        name = _invented_name(name, rng)
    elif kind == "bad_arguments":
        del args[rng.choice(strings)]
    elif kind == "entity_not_found":
        key = strings[0]
        args[key] = _missing_id(str(args[key]))
    return ToolCall(id=ident, name=name, arguments=args)


def oracle_plan(
    task: Task,
    *,
    slip_rate: float = 0.0,
    slip_kinds: tuple[str, ...] = SLIP_KINDS,
    rng: random.Random | None = None,
) -> list[Message]:
    """The oracle's turns for `task`, in order (with seeded slips when `slip_rate` > 0)."""
    domain = get_domain(task.domain)
    rng = rng or random.Random(0)
    plan: list[Message] = []
    for index, action in enumerate(task.actions):
        for ask in task.asks:
            if ask.before == index:
                plan.append(Message(role="assistant", content=ask_text(ask.keys)))
        if slip_rate > 0 and rng.random() < slip_rate:
            slip = _slip(action, list(slip_kinds), rng, f"call_{index}_slip")
            if slip is not None:
                plan.append(Message(role="assistant", tool_calls=[slip]))
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
