"""Live episodes against archived ones: identical message by message, or the first difference.

`flatscore demo` runs a slice of a committed study again and asks whether this machine
plays every episode exactly as the archive holds it. Two episodes are the same episode when
they have the same model, arm, domain, task and trial; they are *identical* when their
seeds, outcomes (termination, reward and its breakdown, token counts, the metadata both
record) and every message's role, text, tool calls (name, arguments), tool result, flags
and token counts agree. What depends on the machine and the moment is not compared:
timings, latencies, the serving process (pid, resident memory).

A difference is named at its first place — the episode, the message (turn) and the first
differing character of that message's text, with both texts around it — because one
changed token changes everything after it: the first divergence is the one that explains
the rest. What is found is data; `flatscore.report.reproduction` says it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from flatscore.episode import Episode, Message
from flatscore.errors import InputError
from flatscore.store.archive import archived, chunks

EXCERPT = 60
"""Characters of each text shown on either side of the first difference."""
EPISODE_FIELDS = ("seed", "termination_reason", "reward", "reward_breakdown", "usage")
"""An episode's outcome fields compared (besides its messages and shared metadata)."""
VOLATILE_METADATA = frozenset({"played_by"})
"""Metadata that names the process, not the episode."""

Key = tuple[str, str, str, str, int]


class EpisodeRef(BaseModel):
    """Which episode a finding is about."""

    episode_id: str
    arm: str
    domain: str
    task_id: str
    trial: int

    @classmethod
    def fields_of(cls, ep: Episode) -> dict[str, Any]:
        """The episode's values of these fields (to build a finding about it)."""
        return {name: getattr(ep, name) for name in EpisodeRef.model_fields}


class Divergence(EpisodeRef):
    """Where a live episode first differs from its archived one."""

    turn: int | None
    """The message's index in the episode (0: the greeting); None: an episode-level field."""
    field: str
    """What differs: `text` (content and tool calls), `tool_result`, `usage`, a flag, a
    missing message, or an episode field."""
    position: int | None
    """The first differing character of the field's text (None where it is not text)."""
    archived: str
    live: str


class EpisodeCheck(EpisodeRef):
    """One live episode against the archive."""

    identical: bool
    divergence: Divergence | None = None


class Reproduction(BaseModel):
    """Every live episode of a run against an archive."""

    archive: str
    checked: int
    identical: int
    not_archived: list[str]
    """Live episode ids the archive has no episode for (counted as not reproduced)."""
    episodes: list[EpisodeCheck]
    first_divergence: Divergence | None = None
    """The first divergent episode in (arm, domain, task, trial) order."""

    @property
    def exact(self) -> bool:
        return self.checked > 0 and self.identical == self.checked


def key_of(ep: Episode) -> Key:
    return (ep.model, ep.arm, ep.domain, ep.task_id, ep.trial)


def _message_text(m: Message) -> str:
    """A message's text as compared: its content, then its tool calls (name and arguments)."""
    parts = [m.content or ""]
    parts += [
        json.dumps({"name": c.name, "arguments": c.arguments}, sort_keys=True, ensure_ascii=False)
        for c in m.tool_calls
    ]
    return "\n".join(parts)


def _first_difference(a: str, b: str) -> int:
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def _excerpt(text: str, at: int) -> str:
    start = max(0, at - EXCERPT)
    return (
        ("…" if start else "")
        + text[start : at + EXCERPT]
        + ("…" if at + EXCERPT < len(text) else "")
    )


def _dumped(value: Any) -> str:
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _message_divergence(a: Message, b: Message) -> tuple[str, int | None, str, str] | None:
    """(field, position, archived, live) of the first difference between two messages."""
    if a.role != b.role:
        return "role", None, a.role, b.role
    ta, tb = _message_text(a), _message_text(b)
    if ta != tb:
        at = _first_difference(ta, tb)
        return "text", at, _excerpt(ta, at), _excerpt(tb, at)
    ids_a = [(c.id, c.requestor) for c in a.tool_calls]
    ids_b = [(c.id, c.requestor) for c in b.tool_calls]
    if ids_a != ids_b:
        return "tool_calls", None, _dumped(ids_a), _dumped(ids_b)
    for name in ("tool_result", "malformed", "repair", "usage"):
        va, vb = _dumped(getattr(a, name)), _dumped(getattr(b, name))
        if va != vb:
            at = _first_difference(va, vb)
            return name, at, _excerpt(va, at), _excerpt(vb, at)
    return None


def compare(archived_ep: Episode, live: Episode) -> Divergence | None:
    """The first difference between an archived episode and its live replay (None: identical)."""

    def diverged(turn: int | None, field: str, pos: int | None, a: str, b: str) -> Divergence:
        return Divergence(
            **EpisodeRef.fields_of(live),
            turn=turn,
            field=field,
            position=pos,
            archived=a,
            live=b,
        )

    for turn, (a, b) in enumerate(zip(archived_ep.messages, live.messages, strict=False)):
        found = _message_divergence(a, b)
        if found is not None:
            return diverged(turn, *found)
    na, nb = len(archived_ep.messages), len(live.messages)
    if na != nb:
        turn = min(na, nb)
        text = lambda ms: _message_text(ms[turn]) if turn < len(ms) else "(no message)"  # noqa: E731
        return diverged(turn, "message", None, text(archived_ep.messages), text(live.messages))
    for name in EPISODE_FIELDS:
        va, vb = _dumped(getattr(archived_ep, name)), _dumped(getattr(live, name))
        if va != vb:
            return diverged(None, name, None, va, vb)
    shared = (set(archived_ep.metadata) & set(live.metadata)) - VOLATILE_METADATA
    for name in sorted(shared):
        va, vb = _dumped(archived_ep.metadata[name]), _dumped(live.metadata[name])
        if va != vb:
            return diverged(None, f"metadata.{name}", None, va, vb)
    return None


def archived_episodes(archive: Path, keys: set[Key]) -> dict[Key, Episode]:
    """The archive's episodes with these keys, read only from the run files they can be in
    (`<model>__<arm>` chunks)."""
    stems = {f"{model}__{arm}" for model, arm, *_ in keys}
    found: dict[Key, Episode] = {}
    for stem, paths in chunks(archive).items():
        if stem not in stems:
            continue
        for ep, _ in archived(paths):
            key = key_of(ep)
            if key in keys:
                found.setdefault(key, ep)
    return found


def reproduce(live: Iterable[Episode], archive: Path) -> Reproduction:
    """Every live episode against the archive's episode with the same key."""
    episodes = sorted(live, key=key_of)
    if not episodes:
        raise InputError("no live episodes to compare with the archive", file=str(archive))
    archive_eps = archived_episodes(archive, {key_of(ep) for ep in episodes})
    checks: list[EpisodeCheck] = []
    missing: list[str] = []
    first: Divergence | None = None
    for ep in episodes:
        old = archive_eps.get(key_of(ep))
        if old is None:
            missing.append(ep.episode_id)
            div = None
        else:
            div = compare(old, ep)
            first = first or div
        checks.append(
            EpisodeCheck(
                **EpisodeRef.fields_of(ep),
                identical=old is not None and div is None,
                divergence=div,
            )
        )
    return Reproduction(
        archive=str(archive),
        checked=len(checks),
        identical=sum(c.identical for c in checks),
        not_archived=missing,
        episodes=checks,
        first_divergence=first,
    )
