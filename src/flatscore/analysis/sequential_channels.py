"""Per-channel amplification at every look of a sequential comparison (docs/analysis.md,
"Sequential verdicts").

A flat score with one amplified channel is "flat score, amplified failures" in the fixed
design even when the all-channel ratio is not significant (a dropped argument in a few
calls is a small share of all failures). The sequential decision tests the same channels on
the tasks read so far, one-sided (more failures in the arm), with the fixed design's test:
the task-clustered score test of the rate ratio (`rate_ratio.ratio_p`, t(n − 1)),
and, for a channel the reference has not failed in on those tasks (no ratio), the exact
sign test over tasks (`task_sign`: tasks where only the arm fails this way against tasks
where only the reference does). The score statistic is normalised by its own per-task
spread, so a prefix whose channel failures sit in one looping task gives t ≈ 1, not a
decision (study v1's fp8 telecom: 27 unknown-tool failures in 5 tasks against 3 in 3). A
channel where the arm never failed has no test. `sequential.decide` corrects the channels of
all comparisons as one family (Holm in its group-sequential form).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import binom, norm

from flatscore.analysis.rate_ratio import ratio_p


@dataclass(frozen=True)
class ChannelCounts:
    """Per-task mean failures in each channel and the channel's denominator (agent tool
    calls; attempts for malformed output), each (..., channels, tasks), tasks in reading
    order."""

    names: tuple[str, ...]
    failed_arm: np.ndarray
    den_arm: np.ndarray
    failed_ref: np.ndarray
    den_ref: np.ndarray

    def head(self, n: int) -> tuple[np.ndarray, ...]:
        return tuple(
            np.asarray(a, dtype=np.float64)[..., :n]
            for a in (self.failed_arm, self.den_arm, self.failed_ref, self.den_ref)
        )


def sign_test_greater(arm: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """One-sided exact sign test over tasks (last axis): P(X ≥ arm-only tasks) for X ~
    Binomial(tasks where exactly one side fails, 1/2); 1 where no task is one-sided."""
    a, r = np.asarray(arm) > 0, np.asarray(ref) > 0
    arm_only = (a & ~r).sum(axis=-1)
    n = arm_only + (r & ~a).sum(axis=-1)
    return np.where(n > 0, binom.sf(arm_only - 1, np.maximum(n, 1), 0.5), 1.0)


def channel_p(
    failed_arm: np.ndarray,
    den_arm: np.ndarray,
    failed_ref: np.ndarray,
    den_ref: np.ndarray,
) -> np.ndarray:
    """One-sided p for "the channel's rate ratio is above 1" on all tasks given (last axis):
    the score test's where the reference failed this way, the sign test's where it did not
    and the arm did, else NaN (no test)."""
    p_ratio = ratio_p(failed_arm, den_arm, failed_ref, den_ref)
    has_ratio = (failed_ref.sum(axis=-1) > 0) & (failed_arm.sum(axis=-1) > 0)
    failed = failed_arm.sum(axis=-1) > 0
    p_sign = sign_test_greater(failed_arm, failed_ref)
    return np.where(has_ratio, p_ratio, np.where(failed, p_sign, np.nan))


def channel_z(counts: ChannelCounts, looks: list[int]) -> np.ndarray:
    """Z = Φ⁻¹(1 − p) of every channel at every look, (..., channels, looks); −inf where a
    channel has no test."""
    out = []
    for n in looks:
        p = channel_p(*counts.head(n))
        out.append(np.where(np.isnan(p), -np.inf, norm.isf(np.nan_to_num(p, nan=1.0))))
    lead = np.shape(counts.failed_arm)[:-1]
    return np.stack(out, axis=-1) if out else np.zeros((*lead, 0))
