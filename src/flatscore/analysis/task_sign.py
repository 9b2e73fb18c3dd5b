"""An exact test over tasks for a channel too sparse for a rate ratio (docs/analysis.md,
"Statistical choices": channels new in the arm).

When the reference never fails in a channel (no ratio), or all of one arm's failures in it
sit in one task (the jackknife of the clustered ratio has nothing to vary), the channel is
still testable: count the paired tasks where only the arm shows it and those where only the
reference does. With no change between the arms a task's episodes are exchangeable between
them, so a task that shows the channel on one side only is as likely to be the arm's as the
reference's: the arm-only count is Binomial(n, 1/2) given n such tasks (the sign test; exact
when both arms ran the same number of trials per task, as a balanced study does). Tasks where
both or neither show it carry no information about the direction and are left out. Only
counts of tasks enter, so a single task that repeats a failure forty times counts once: the
test cannot be carried by one looping episode.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

METHOD = (
    "exact sign test over paired tasks: tasks where only the arm shows the channel against "
    "tasks where only the reference does, Binomial(n, 1/2) under no change; two-sided p"
)


@dataclass(frozen=True)
class TaskSignTest:
    """`arm_only` / `ref_only`: paired tasks where only that side failed in the channel."""

    arm_only: int
    ref_only: int
    p_value: float


def task_sign_test(arm: np.ndarray, ref: np.ndarray) -> TaskSignTest:
    """The sign test on per-task failure counts (or per-task means) of the two arms, one
    entry per paired task; p = 1 when no task shows the channel on one side only."""
    a, r = np.asarray(arm) > 0, np.asarray(ref) > 0
    arm_only, ref_only = int((a & ~r).sum()), int((r & ~a).sum())
    n = arm_only + ref_only
    p = 1.0 if n == 0 else float(stats.binomtest(arm_only, n, 0.5).pvalue)
    return TaskSignTest(arm_only=arm_only, ref_only=ref_only, p_value=p)
