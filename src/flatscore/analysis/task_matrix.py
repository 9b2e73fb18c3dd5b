"""The task matrix: every per-episode count averaged within its task (docs/analysis.md,
"Weighting").

Tasks are the unit of the analysis: a task run four times must not weigh four times as much
as a task run once. Every headline, test and ratio is therefore computed from per-task means
(each task's episodes averaged, then tasks summed or averaged): a success rate is the mean of
the tasks' success rates, a channel rate is Σ_tasks mean failures / Σ_tasks mean calls. With
the same number of trials everywhere this equals the pooled numbers. `analyze` (arms and
comparisons) and the repair effect both build their numbers from this one matrix, and the
task bootstrap resamples its rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from flatscore.analysis.budget import success_within_budgets
from flatscore.analysis.channels import CHANNELS, LEAF_CHANNELS, UNKNOWN_TOOL_LEAVES
from flatscore.analysis.facts import TRAJECTORY_METRICS, EpisodeFacts

MALFORMED = "malformed_output"
"""Not a tool call: its rate is per attempted call (agent tool calls + malformed outputs), so
it stays in [0, 1]."""


def columns(budgets: Sequence[int]) -> dict[str, int]:
    """Column name → index: `task` (1 per task), S(K) per budget, call counts, channels,
    trajectory lengths and per-episode outcomes."""
    cols = ["task", *(f"S{k}" for k in budgets), "succeeded", "reward", "calls", "attempts"]
    cols += ["agent_failed", "recovered", "failed_with_next", "with_failure"]
    cols += ["repeats", "reissued", "reissued_failed"]
    cols += ["succeeded_with_failure", *CHANNELS, *(f"traj_{m}" for m in TRAJECTORY_METRICS)]
    return {c: i for i, c in enumerate(cols)}


@dataclass(frozen=True)
class TaskMatrix:
    """Per-task means (tasks × columns) of one group of episodes on a fixed task list, and
    per-task mean hallucination counts per name (tasks × names)."""

    tasks: tuple[str, ...]
    columns: Mapping[str, int]
    means: np.ndarray
    names: tuple[str, ...]
    name_means: np.ndarray
    episodes: np.ndarray
    """Episodes per task (0 for a task the group did not run: its row is all zeros)."""

    def column(self, name: str) -> np.ndarray:
        return self.means[:, self.columns[name]]

    def total(self, name: str) -> float:
        return float(self.column(name).sum())

    def rate(self, num: str, den: str) -> float | None:
        """Σ_tasks mean num / Σ_tasks mean den (None when the denominator is 0)."""
        d = self.total(den)
        return self.total(num) / d if d else None


def _per_episode(
    f: EpisodeFacts, cols: Mapping[str, int], s_cols: list[int], s_row: np.ndarray
) -> np.ndarray:
    row = np.zeros(len(cols))
    row[cols["task"]] = 1.0
    row[s_cols] = s_row
    row[cols["succeeded"]] = f.succeeded
    row[cols["reward"]] = f.reward or 0.0
    row[cols["calls"]] = f.agent_calls
    row[cols["attempts"]] = f.agent_calls + f.channels[MALFORMED]
    row[cols["agent_failed"]] = f.agent_failed
    row[cols["recovered"]] = f.recovered
    row[cols["failed_with_next"]] = f.failed_with_next
    row[cols["with_failure"]] = f.agent_failed > 0
    row[cols["repeats"]] = f.repeats
    row[cols["reissued"]] = f.reissued
    row[cols["reissued_failed"]] = f.reissued_failed
    row[cols["succeeded_with_failure"]] = f.agent_failed > 0 and f.succeeded
    for ch in LEAF_CHANNELS:
        row[cols[ch]] = f.channels[ch]
    row[cols["unknown_tool"]] = sum(f.channels[ch] for ch in UNKNOWN_TOOL_LEAVES)
    row[cols["traj_agent_turns"]] = f.agent_turns
    row[cols["traj_agent_tool_calls"]] = f.agent_calls
    row[cols["traj_messages"]] = f.messages
    return row


def task_matrix(
    facts: Sequence[EpisodeFacts],
    tasks: Sequence[str],
    budgets: Sequence[int],
    count: str,
    names: Sequence[str] = (),
) -> TaskMatrix:
    """Average each task's episodes (episodes of tasks not in `tasks` are left out)."""
    cols = columns(budgets)
    index = {t: i for i, t in enumerate(tasks)}
    kept = [f for f in facts if f.task_id in index]
    rows = np.array([index[f.task_id] for f in kept], dtype=np.int64)
    succeeded = np.array([f.succeeded for f in kept], dtype=bool)
    failures = np.array([f.failed_calls(count) for f in kept], dtype=np.int64)
    within = success_within_budgets(succeeded, failures, budgets)
    sums = np.zeros((len(tasks), len(cols)))
    if kept:
        s_cols = [cols[f"S{k}"] for k in budgets]
        per_ep = np.stack([_per_episode(f, cols, s_cols, within[i]) for i, f in enumerate(kept)])
        np.add.at(sums, rows, per_ep)
    episodes = np.bincount(rows, minlength=len(tasks)).astype(np.float64)
    scale = np.where(episodes > 0, 1.0 / np.maximum(episodes, 1.0), 0.0)[:, None]
    name_index = {n: j for j, n in enumerate(names)}
    name_sums = np.zeros((len(tasks), len(names)))
    for r, f in zip(rows, kept, strict=True):
        for name, c in f.hallucinated.items():
            if name in name_index:
                name_sums[r, name_index[name]] += c
    return TaskMatrix(
        tasks=tuple(tasks),
        columns=cols,
        means=sums * scale,
        names=tuple(names),
        name_means=name_sums * scale,
        episodes=episodes,
    )
