"""One pass over an episode's messages: the per-episode counts every statistic is built from.

Reading each episode once into `EpisodeFacts` keeps the statistics small pure functions over
arrays, and lets the bootstrap work on per-task sums instead of on messages.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass

from flatscore.analysis.channels import (
    LEAF_CHANNELS,
    UNKNOWN_TOOL_LEAVES,
    ChannelRules,
    episode_classifier,
)
from flatscore.episode import Episode

TRAJECTORY_METRICS: tuple[str, ...] = ("agent_turns", "agent_tool_calls", "messages")
"""Trajectory lengths per episode: agent turns, agent tool calls, messages."""


@dataclass(frozen=True)
class EpisodeFacts:
    """Counts for one episode (definitions in docs/analysis.md, "Definitions")."""

    episode_id: str
    task_id: str
    trial: int
    succeeded: bool
    reward: float | None
    termination: str
    infrastructure: bool
    agent_calls: int
    agent_failed: int
    unanswered: int
    channels: dict[str, int]
    user_calls: int
    user_failed: int
    malformed: int
    hallucinated: Counter[str]
    recovered: int
    failed_with_next: int
    repeats: int
    """Failed agent calls whose previous agent call failed with the same name and arguments
    (the agent looping on the call that had just failed)."""
    reissued: int
    """Agent calls with the name and arguments of an earlier agent call of the episode that
    succeeded (paying a paid bill again)."""
    reissued_failed: int
    """Of `reissued`, the ones that failed."""
    agent_turns: int
    messages: int
    tool_list_source: str
    max_errors: int | None
    counted: str

    def failed_calls(self, count: str) -> int:
        """Failed-call count for the error budget: `all` (agent + user, like τ²) or `agent`."""
        return self.agent_failed + self.user_failed if count == "all" else self.agent_failed


def episode_facts(episode: Episode, rules: ChannelRules) -> EpisodeFacts:
    """Count calls, failures by channel, recoveries and lengths in one episode."""
    results = episode.tool_results()
    classify = episode_classifier(episode, rules)
    channels = dict.fromkeys(LEAF_CHANNELS, 0)
    hallucinated: Counter[str] = Counter()
    outcomes: list[bool | None] = []  # per agent call, in order: failed? (None: no answer)
    keys: list[str] = []  # per answered agent call, in order: its name and arguments
    user_calls = user_failed = malformed = agent_turns = 0

    for message in episode.messages:
        if message.role == "assistant":
            agent_turns += 1
            if message.malformed:
                malformed += 1
        for call in message.tool_calls:
            result = results.get(call.id)
            if call.requestor == "user":
                user_calls += 1
                user_failed += bool(result is not None and result.error)
                continue
            if result is None:
                outcomes.append(None)
                continue
            outcomes.append(result.error)
            keys.append(call_key(call.name, call.arguments))
            if result.error:
                channel = classify(call, result)
                channels[channel] += 1
                if channel in UNKNOWN_TOOL_LEAVES:
                    hallucinated[call.name] += 1
    channels["malformed_output"] = malformed

    recovered = failed_with_next = 0
    for i, outcome in enumerate(outcomes):
        if outcome and i + 1 < len(outcomes):
            failed_with_next += 1
            recovered += outcomes[i + 1] is False
    repeats, reissued, reissued_failed = loops([o for o in outcomes if o is not None], keys)
    has_lists = bool(episode.tools.agent or episode.tools.user)
    return EpisodeFacts(
        episode_id=episode.episode_id,
        task_id=episode.task_id,
        trial=episode.trial,
        succeeded=episode.succeeded,
        reward=episode.reward,
        termination=str(episode.termination_reason.value),
        infrastructure=episode.is_infrastructure_error,
        agent_calls=len(outcomes),
        agent_failed=sum(1 for o in outcomes if o),
        unanswered=sum(1 for o in outcomes if o is None),
        channels=channels,
        user_calls=user_calls,
        user_failed=user_failed,
        malformed=malformed,
        hallucinated=hallucinated,
        recovered=recovered,
        failed_with_next=failed_with_next,
        repeats=repeats,
        reissued=reissued,
        reissued_failed=reissued_failed,
        agent_turns=agent_turns,
        messages=len(episode.messages),
        tool_list_source=episode.tools.source if has_lists else "none",
        max_errors=episode.error_budget.max_errors,
        counted=episode.error_budget.counted,
    )


def call_key(name: str, arguments: object) -> str:
    """A call's identity for the loop counts: its name and its arguments (key order ignored;
    unparsed argument text as written)."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments, sort_keys=True)
    return f"{name}\x00{args}"


def loops(failed: list[bool], keys: list[str]) -> tuple[int, int, int]:
    """(repeats, reissued, reissued that failed) over an episode's answered agent calls in
    order: a repeat is a failed call whose previous call failed with the same key; a
    re-issue is a call whose key an earlier call of the episode succeeded with."""
    repeats = reissued = reissued_failed = 0
    succeeded: set[str] = set()
    for i, (fail, key) in enumerate(zip(failed, keys, strict=True)):
        if fail and i > 0 and failed[i - 1] and keys[i - 1] == key:
            repeats += 1
        if key in succeeded:
            reissued += 1
            reissued_failed += fail
        if not fail:
            succeeded.add(key)
    return repeats, reissued, reissued_failed
