"""Trajectory length (agent turns, agent tool calls, messages per episode): extra failures
lengthen episodes even when they end well."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from flatscore.analysis.facts import TRAJECTORY_METRICS, EpisodeFacts
from flatscore.analysis.result import Distribution, TrajectoryStats

__all__ = ["TRAJECTORY_METRICS", "distribution", "metric_values", "trajectory_stats"]


def metric_values(facts: Sequence[EpisodeFacts], metric: str) -> np.ndarray:
    attr = {"agent_tool_calls": "agent_calls"}.get(metric, metric)
    return np.array([getattr(f, attr) for f in facts], dtype=np.float64)


def distribution(values: np.ndarray) -> Distribution:
    """Mean, sample sd and quartiles of one per-episode count."""
    if values.size == 0:
        return Distribution(mean=None, sd=None, min=None, p25=None, median=None, p75=None, max=None)
    q = np.percentile(values, [0, 25, 50, 75, 100])
    sd = float(np.std(values, ddof=1)) if values.size > 1 else 0.0
    return Distribution(
        mean=float(values.mean()),
        sd=sd,
        min=float(q[0]),
        p25=float(q[1]),
        median=float(q[2]),
        p75=float(q[3]),
        max=float(q[4]),
    )


def trajectory_stats(facts: Sequence[EpisodeFacts]) -> TrajectoryStats:
    return TrajectoryStats(**{m: distribution(metric_values(facts, m)) for m in TRAJECTORY_METRICS})
