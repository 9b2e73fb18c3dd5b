"""What a training set holds, read back from its `dataset.json` records (`flatscore.train.
train.load_dataset`): conversations per domain, planted mistakes per conversation and per
channel, and how many failing calls were made twice.

A record names its planted channels (`mistake`, joined by "+") but not the repeats, so
those are counted from the tokens: a failing call carries no loss, so the failing calls are
exactly the agent turns without a trained token (after the untrained greeting), and a
mistake made twice adds one such turn. No tokenizer is needed: the first token of every
record opens a turn (`<|im_start|>`), and the token after it names the turn's role; the
agent's role is the one of the turns that carry loss.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field


class DomainComposition(BaseModel):
    """One domain's share of a training set."""

    conversations: int = 0
    detour: int = 0
    by_mistakes: dict[int, int] = Field(default_factory=dict)
    """Conversations by how many planted mistakes they hold (0 = clean)."""
    channels: dict[str, int] = Field(default_factory=dict)
    """Planted mistakes by channel (a conversation with two counts twice)."""
    made_twice: int = 0
    """Planted mistakes whose failing call was made twice (`repeat_share`)."""
    uncounted: int = 0
    """Conversations with fewer failing turns than planted mistakes (cut at `max_tokens`):
    their repeats are not counted."""

    @property
    def mistakes(self) -> int:
        return sum(self.channels.values())


def planted(record: dict[str, Any]) -> list[str]:
    """The planted channels of one record, in order (empty: a clean conversation)."""
    text = record.get("mistake")
    return text.split("+") if text else []


def failing_turns(ids: Sequence[int], mask: Sequence[bool]) -> list[list[int]]:
    """The token ids of the agent turns that carry no loss, the greeting (the first agent
    turn) left out: the planted failing calls, in order."""
    if not ids:
        return []
    start = ids[0]
    turns: list[tuple[list[int], bool]] = []
    for token, trained in zip(ids, mask, strict=True):
        if token == start:
            turns.append(([], False))
        body, seen = turns[-1]
        body.append(token)
        turns[-1] = (body, seen or trained)
    agent_roles = {body[1] for body, trained in turns if trained and len(body) > 1}
    if len(agent_roles) != 1:
        return []
    role = agent_roles.pop()
    agent = [(body, trained) for body, trained in turns if len(body) > 1 and body[1] == role]
    return [body for body, trained in agent[1:] if not trained]


def composition(data: Sequence[dict[str, Any]]) -> dict[str, DomainComposition]:
    """Per domain: conversations, detours, mistakes per conversation and per channel,
    repeats (see the module docstring)."""
    out: dict[str, DomainComposition] = {}
    for record in data:
        d = out.setdefault(str(record.get("domain", "?")), DomainComposition())
        channels = planted(record)
        d.conversations += 1
        d.detour += bool(record.get("detour"))
        d.by_mistakes[len(channels)] = d.by_mistakes.get(len(channels), 0) + 1
        d.channels = dict(Counter(d.channels) + Counter(channels))
        if not channels or "ids" not in record:
            continue
        extra = len(failing_turns(record["ids"], record["mask"])) - len(channels)
        if extra < 0:
            d.uncounted += 1
        else:
            d.made_twice += extra
    return dict(sorted(out.items()))
