"""Recovery (DESIGN "Recovery rate"): does the agent get back on track after a failed call?"""

from __future__ import annotations

from collections.abc import Sequence

from flatscore.analysis.facts import EpisodeFacts


def _share(num: int, den: int) -> float | None:
    return num / den if den else None


def call_recovery_rate(facts: Sequence[EpisodeFacts]) -> float | None:
    """Failed agent calls whose next agent tool call in the episode succeeds / failed agent
    calls (a failure with no later call counts as not recovered)."""
    return _share(sum(f.recovered for f in facts), sum(f.agent_failed for f in facts))


def episode_recovery_rate(facts: Sequence[EpisodeFacts]) -> float | None:
    """Episodes with ≥ 1 failed agent call that still succeed / episodes with ≥ 1 failure."""
    hit = [f for f in facts if f.agent_failed > 0]
    return _share(sum(f.succeeded for f in hit), len(hit))
