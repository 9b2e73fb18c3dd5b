"""The scripted user: deterministic, yet with phrasing varied by seed.

It opens with one of the task's request phrasings; answers requests for information it knows
by recognising what the agent asked for (email, name + zip, phone number, a confirmation);
performs device actions the agent asks for (dual control) and reports what it saw; says
`###STOP###` when its goal is reached, or after `patience` turns without progress (a turn
with nothing new to answer or do). Variants are drawn from `random.Random(seed, task)` so the
same seed gives the same conversation and different seeds give varied training data.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any

from flatscore.agents.base import ToolSchema
from flatscore.domains import get_domain
from flatscore.domains.framework import Task, UserToolkit
from flatscore.episode import Message, ToolCall
from flatscore.users.base import STOP, User

ANSWERS: dict[str, list[str]] = {
    "email": ["My email is {email}.", "It's {email}.", "Sure, it's {email}."],
    "name_zip": [
        "My name is {first_name} {last_name} and my zip code is {zip}.",
        "I'm {first_name} {last_name}, zip code {zip}.",
        "{first_name} {last_name}, zip {zip}.",
    ],
    "phone_number": [
        "My number is {phone_number}.",
        "It's {phone_number}.",
        "Sure: {phone_number}.",
    ],
    "confirm": ["Yes, please.", "Yes, go ahead.", "Yes."],
}
UNKNOWN = {
    "email": ["I don't remember my email.", "Sorry, I don't remember which email I used."],
    "name_zip": ["I'd rather give you my email: {email}.", "Can you use my email instead? {email}"],
}
REPORT_STATUS = [
    "It shows: {result}",
    "Here is what I see: {result}",
    "The status bar says: {result}",
]
REPORT_DONE = ["Done. {result}", "OK, I did it. {result}", "{result}"]
THANKS = ["Thank you, that's all I needed.", "Great, thanks!", "Perfect, thank you."]
WORKS = ["It works now, thanks!", "Everything works now, thank you!"]
NUDGE = ["Can you help me with that?", "I still need help with my request.", "Sorry, is that done?"]
GIVE_UP = ["I don't think you can help me. Bye.", "Never mind, goodbye."]

_CONFIRM = re.compile(
    r"\b(confirm|proceed|go ahead|shall i|should i|would you like me|do you want me)\b"
)


def requested_keys(text: str) -> list[str]:
    """Which pieces of information an agent message asks for."""
    t = text.lower()
    keys = []
    if "email" in t or "e-mail" in t:
        keys.append("email")
    if re.search(r"\bzip\b|postal|\bname\b", t):
        keys.append("name_zip")
    if "phone number" in t or (re.search(r"\bnumber\b", t) and "order" not in t):
        keys.append("phone_number")
    if _CONFIRM.search(t):
        keys.append("confirm")
    return keys


class ScriptedUser(User):
    """Deterministic user simulator; `patience` turns without progress end the episode."""

    name = "scripted"

    def __init__(self, patience: int = 3) -> None:
        self.patience = patience
        self._rng = random.Random(0)
        self._task: Task | None = None
        self._goal: Callable[[], bool] = lambda: False
        self._given: set[str] = set()
        self._idle = 0
        self._device: type[UserToolkit[Any]] | None = None

    def start(self, task: Task, seed: int, goal_reached: Callable[[], bool]) -> None:
        self._rng = random.Random(f"{seed}|{task.domain}|{task.id}")
        self._task = task
        self._goal = goal_reached
        self._given = set()
        self._idle = 0
        self._device = get_domain(task.domain).user_toolkit
        self._opening = self._rng.choice(task.scenario.requests)
        self._calls = 0

    def _say(self, text: str) -> Message:
        return Message(role="user", content=text)

    def _pick(self, options: list[str], **values: str) -> str:
        return self._rng.choice(options).format(**values)

    async def act(self, messages: list[Message], tools: list[ToolSchema]) -> Message:
        assert self._task is not None, "start() was not called"
        if not any(m.role == "user" for m in messages):
            return self._say(self._opening)
        last = messages[-1]
        if last.role == "tool":
            return self._report(messages)
        if self._goal():
            return self._say(f"{self._pick(THANKS)} {STOP}")
        text = last.content or ""
        if self._device is not None:
            actions = self._device.parse_requests(text)
            if actions:
                self._idle = 0
                calls = []
                for action in actions:
                    self._calls += 1
                    calls.append(
                        ToolCall(
                            id=f"user_call_{self._calls}",
                            name=action.name,
                            arguments=dict(action.arguments),
                            requestor="user",
                        )
                    )
                return Message(role="user", tool_calls=calls)
        reply = self._answer(text)
        if reply is not None:
            return self._say(reply)
        self._idle += 1
        if self._idle >= self.patience:
            return self._say(f"{self._pick(GIVE_UP)} {STOP}")
        return self._say(self._pick(NUDGE))

    def _answer(self, text: str) -> str | None:
        assert self._task is not None
        info = self._task.scenario.known_info
        parts: list[str] = []
        new = False
        for key in requested_keys(text):
            fields = ["first_name", "last_name", "zip"] if key == "name_zip" else [key]
            if key == "confirm" or all(f in info for f in fields):
                parts.append(self._pick(ANSWERS[key], **info))
            elif key in UNKNOWN and (key != "name_zip" or "email" in info):
                parts.append(self._pick(UNKNOWN[key], **info))
            else:
                continue
            if key not in self._given:
                new = True
                self._given.add(key)
        if not parts:
            return None
        if new:
            self._idle = 0
        else:
            self._idle += 1
            if self._idle >= self.patience:
                return f"{self._pick(GIVE_UP)} {STOP}"
        return " ".join(parts)

    def _report(self, messages: list[Message]) -> Message:
        """Tell the agent, in words, what the device actions just did."""
        results = []
        for m in reversed(messages):
            if m.role != "tool" or m.tool_result is None:
                break
            results.append(m.tool_result)
        results.reverse()
        calls = {c.id: c.name for m in messages if m.role == "user" for c in m.tool_calls}
        sentences = []
        for result in results:
            options = REPORT_STATUS if calls.get(result.call_id) == "check_status" else REPORT_DONE
            sentences.append(self._pick(options, result=result.text))
        text = " ".join(sentences)
        if self._goal():
            text = f"{text} {self._pick(WORKS)} {STOP}"
        return self._say(text)
