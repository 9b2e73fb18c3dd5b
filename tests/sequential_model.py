"""The simulation model of the sequential-verdict tests (tests/analysis/test_sequential.py,
the CLI replay test): synthetic comparisons, task by task.

Success at the default budget: the model of tests/analysis/test_coverage.py — task solve
probabilities q ~ Beta(4·s, 4·(1 − s)); the arm solves with q·(1 − gap/s); trials
independent, or coupled (each arm trial reuses its reference trial's uniform with
probability 0.75, as common random numbers do where quantization changes some episodes).
Failed calls: each episode makes `calls` agent tool calls; a task's per-call failure
probability is r = min(0.5, base·G), G ~ Gamma(2, 1/2) (mean 1: tasks differ), and the arm's
is ratio·r (≤ 1 for ratios up to 2, so the true ratio is exactly `ratio`); the arm's call
outcomes are coupled to the reference's in the same way as its trials. The reference's
failure rate per call is then ≈ 0.3, the study v1 reference's 0.33–0.41.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CONCENTRATION = 4.0
COUPLINGS = {"independent": 0.0, "coupled": 0.75}


@dataclass(frozen=True)
class Comparisons:
    """(studies × tasks) per-task arrays, tasks in reading order."""

    differences: np.ndarray
    failed_arm: np.ndarray
    calls_arm: np.ndarray
    failed_ref: np.ndarray
    calls_ref: np.ndarray
    success_ref: np.ndarray
    success_arm: np.ndarray
    outcomes_ref: np.ndarray
    """(studies × tasks × trials) episode successes, for writing run files."""
    outcomes_arm: np.ndarray
    failures_ref: np.ndarray
    """(studies × tasks × trials) failed calls per episode."""
    failures_arm: np.ndarray
    calls: int

    def arrays(self) -> tuple[np.ndarray, ...]:
        return (self.differences, self.failed_arm, self.calls_arm, self.failed_ref, self.calls_ref)


def simulate(
    rng: np.random.Generator,
    studies: int,
    gap: float = 0.0,
    s: float = 0.6,
    coupling: float = 0.0,
    ratio: float = 1.0,
    tasks: int = 114,
    trials: int = 4,
    base: float = 0.3,
    calls: int = 6,
) -> Comparisons:
    q = rng.beta(CONCENTRATION * s, CONCENTRATION * (1 - s), (studies, tasks, 1))
    u = rng.random((studies, tasks, trials))
    v = np.where(rng.random(u.shape) < coupling, u, rng.random(u.shape))
    ok_ref, ok_arm = u < q, v < q * (1 - gap / s)
    r = np.minimum(0.5, base * rng.gamma(2.0, 0.5, (studies, tasks, 1, 1)))
    u = rng.random((studies, tasks, trials, calls))
    v = np.where(rng.random(u.shape) < coupling, u, rng.random(u.shape))
    f_ref, f_arm = (u < r).sum(-1), (v < np.minimum(1.0, ratio * r)).sum(-1)
    per_call = np.full((studies, tasks), float(calls))
    return Comparisons(
        differences=ok_ref.mean(-1) - ok_arm.mean(-1),
        failed_arm=f_arm.mean(-1),
        calls_arm=per_call,
        failed_ref=f_ref.mean(-1),
        calls_ref=per_call,
        success_ref=ok_ref.mean(-1),
        success_arm=ok_arm.mean(-1),
        outcomes_ref=ok_ref,
        outcomes_arm=ok_arm,
        failures_ref=f_ref,
        failures_arm=f_arm,
        calls=calls,
    )
