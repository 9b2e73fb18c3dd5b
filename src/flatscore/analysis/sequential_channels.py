"""Per-channel amplification at every look of a sequential comparison (docs/analysis.md,
"Sequential verdicts").

A flat score with one amplified channel is "flat score, amplified failures" in the fixed
design even when the all-channel ratio is not significant (a dropped argument in a few
calls is a small share of all failures). The sequential decision tests the same channels on
the tasks read so far, one-sided (more failures in the arm), and asks the tasks to agree:
the exact sign test over tasks (`task_sign`: tasks where only the arm fails this way against
tasks where only the reference does) and, where it exists, the fixed design's rate-ratio
test (`rate_ratio.log_ratio_jackknife`, t(n − 1)) must both reject — the larger of the two
p-values is the channel's. On a prefix of a few dozen tasks a channel's failures often sit
in a handful of tasks, one of them looping, and the jackknife's t then claims far more than
the data hold (study v1's fp8 telecom: 27 unknown-tool failures in 5 tasks against 3 in 3,
jackknife p = 1e−5, sign test 2 tasks to 0); the sign test cannot be carried by one
looping task. Since the channel's p is never below the sign test's, its error over all
looks is at most the sign test's (an intersection–union test). A channel where the arm
never failed has no test. `sequential.decide` corrects the channels of all comparisons as
one family (Holm in its group-sequential form).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import binom, norm
from scipy.stats import t as student_t

from flatscore.analysis.rate_ratio import log_ratio_jackknife


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
    the larger of the sign test's and the rate-ratio test's where the ratio exists, the sign
    test's alone where it does not and the arm failed this way, else NaN (no test)."""
    n = failed_arm.shape[-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        lr, se = log_ratio_jackknife(failed_arm, den_arm, failed_ref, den_ref)
        ok = np.isfinite(lr) & np.isfinite(se) & (se > 0)
        p_ratio = student_t.sf(np.where(ok, lr / np.where(ok, se, 1.0), 0.0), max(n - 1, 1))
    failed = failed_arm.sum(axis=-1) > 0
    p_sign = sign_test_greater(failed_arm, failed_ref)
    return np.where(ok, np.maximum(p_ratio, p_sign), np.where(failed, p_sign, np.nan))


def channel_z(counts: ChannelCounts, looks: list[int]) -> np.ndarray:
    """Z = Φ⁻¹(1 − p) of every channel at every look, (..., channels, looks); −inf where a
    channel has no test."""
    out = []
    for n in looks:
        p = channel_p(*counts.head(n))
        out.append(np.where(np.isnan(p), -np.inf, norm.isf(np.nan_to_num(p, nan=1.0))))
    lead = np.shape(counts.failed_arm)[:-1]
    return np.stack(out, axis=-1) if out else np.zeros((*lead, 0))
