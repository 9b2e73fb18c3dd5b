"""The transcript browser's data: every episode, each failed agent call labelled with its channel.

Channels come from the analysis package's per-call classifier (`classify_failed_call`), the
same function the numbers were computed with, so the browser and the tables agree. The
payload is plain JSON; the page renders it with `textContent` only (see `html.py`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from flatscore.analysis.channels import ChannelRules, episode_classifier
from flatscore.analysis.result import CHANNELS, AnalysisResult, Cell
from flatscore.episode import Episode, Message

MAX_TEXT = 4000
"""Longer message texts are cut (the browser says how much): a report must stay openable."""


def _cut(text: str | None) -> str:
    if not text:
        return ""
    if len(text) <= MAX_TEXT:
        return text
    return f"{text[:MAX_TEXT]}\n… [{len(text) - MAX_TEXT} more characters not shown]"


def cell_key(model: str, domain: str) -> str:
    return f"{model} · {domain}"


def _cell_of(episode: Episode, cells: Sequence[Cell]) -> Cell | None:
    """The analysis cell an episode belongs to: same model and domain, else same domain and
    an arm of that name (the analysis may group model names into families)."""
    for cell in cells:
        if cell.model == episode.model and cell.domain == episode.domain:
            return cell
    for cell in cells:
        if cell.domain == episode.domain and any(a.arm == episode.arm for a in cell.arms):
            return cell
    return None


def _arguments_text(arguments: dict[str, Any] | str) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False, sort_keys=True)


def _outcome(episode: Episode) -> str:
    if episode.is_infrastructure_error:
        return "infrastructure"
    return "success" if episode.succeeded else "failure"


def episode_record(
    episode: Episode, cell: str, rules: ChannelRules, shared: dict[str, int]
) -> dict[str, Any]:
    """One episode for the browser. `shared` interns system prompts (repeated per episode)."""
    results = episode.tool_results()
    names = {c.id: c.name for m in episode.messages for c in m.tool_calls}
    classify = episode_classifier(episode, rules)
    channel_of: dict[str, str] = {}
    agent_calls = 0
    for message in episode.messages:
        for call in message.tool_calls:
            if call.requestor != "agent":
                continue
            agent_calls += 1
            result = results.get(call.id)
            if result is not None and result.error:
                channel_of[call.id] = classify(call, result)
    channels = set(channel_of.values())
    if any(m.malformed for m in episode.messages):
        channels.add("malformed_output")
    return {
        "id": episode.episode_id,
        "cell": cell,
        "arm": episode.arm,
        "task": episode.task_id,
        "trial": episode.trial,
        "outcome": _outcome(episode),
        "reward": episode.reward,
        "termination": episode.termination_reason.value,
        "agent_calls": agent_calls,
        "failed": len(channel_of),
        "channels": sorted(channels),
        "messages": [
            _message_record(m, results, names, channel_of, shared) for m in episode.messages
        ],
    }


def _message_record(
    message: Message,
    results: dict[str, Any],
    names: dict[str, str],
    channel_of: dict[str, str],
    shared: dict[str, int],
) -> dict[str, Any]:
    record: dict[str, Any] = {"role": message.role}
    if message.role == "system" and message.content:
        record["shared"] = shared.setdefault(message.content, len(shared))
    else:
        record["text"] = _cut(message.content)
    if message.malformed:
        record["malformed"] = True
    if message.repair:
        record["repair"] = True
    if message.tool_calls:
        calls = []
        for call in message.tool_calls:
            result = results.get(call.id)
            calls.append(
                {
                    "id": call.id,
                    "name": call.name,
                    "args": _cut(_arguments_text(call.arguments)),
                    "by": call.requestor,
                    "status": "none" if result is None else ("error" if result.error else "ok"),
                    "channel": channel_of.get(call.id),
                }
            )
        record["calls"] = calls
    if message.tool_result is not None:
        res = message.tool_result
        record["result"] = {
            "call": res.call_id,
            "name": names.get(res.call_id, ""),
            "by": res.requestor,
            "error": res.error,
            "channel": channel_of.get(res.call_id),
        }
        record["text"] = _cut(res.text or message.content)
    return record


def browser_payload(
    analysis: AnalysisResult, episodes: Iterable[Episode], rules: ChannelRules
) -> dict[str, Any]:
    """Everything the transcript browser shows, in a deterministic order: cell, task, trial,
    arm (reference first, then the analysis's arm order)."""
    arm_order: dict[tuple[str, str], int] = {}
    for cell in analysis.cells:
        key = cell_key(cell.model, cell.domain)
        for i, arm in enumerate(cell.arms):
            arm_order[(key, arm.arm)] = 0 if arm.arm == cell.reference else i + 1
    keyed = []
    for episode in episodes:
        found = _cell_of(episode, analysis.cells)
        owner = found or episode
        key = cell_key(owner.model, owner.domain)
        order = arm_order.get((key, episode.arm), 1_000)
        sort_key = (key, episode.task_id, episode.trial, order, episode.arm, episode.episode_id)
        keyed.append((sort_key, key, episode))
    keyed.sort(key=lambda item: item[0])
    shared: dict[str, int] = {}
    records = [episode_record(ep, key, rules, shared) for _, key, ep in keyed]
    cells = [cell_key(c.model, c.domain) for c in analysis.cells]
    cells += sorted({r["cell"] for r in records} - set(cells))
    arms_by_cell = {
        cell_key(c.model, c.domain): [c.reference] + [a.arm for a in c.arms if a.arm != c.reference]
        for c in analysis.cells
    }
    for r in records:
        arms = arms_by_cell.setdefault(r["cell"], [])
        if r["arm"] not in arms:
            arms.append(r["arm"])
    return {
        "episodes": records,
        "shared": list(shared),
        "cells": cells,
        "arms_by_cell": arms_by_cell,
        "arms": list(dict.fromkeys(a for arms in arms_by_cell.values() for a in arms)),
        "tasks": sorted({r["task"] for r in records}),
        "channels": [c for c in CHANNELS if any(c in r["channels"] for r in records)],
    }
