"""Study sizing: the smallest Gap(K) a study of a given size detects with 80% power.

Simulation model (the study's "flat score, amplified failures" picture):
- each task t has a solve probability q_t ~ Beta(success·c, (1 − success)·c) (c = 4, task
  heterogeneity), shared by both arms, so both arms have the same score when the budget is
  generous; every trial of every arm is solved independently with probability q_t;
- an episode makes `calls` agent tool calls; each fails independently with probability
  r = Σ rates in the reference and min(1, m·r) in the quantized arm (m = amplification);
- an episode succeeds at budget K when it is solved and has ≤ K failed calls.
For each m on a grid (then bisected near the crossing), `simulations` studies are drawn and
tested with the paired test `flatscore analyze` uses (`paired_score.paired_test`, with one
trial or several); power = share of studies with p < alpha and the arm below the reference.
The answer is the true
Gap(K) = success · (P(Bin(calls, r) ≤ K) − P(Bin(calls, m·r) ≤ K))
at the smallest m whose power reaches the target.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict
from scipy.stats import binom

from flatscore import defaults
from flatscore.analysis.paired_score import paired_test

TASK_CONCENTRATION = 4.0


class PowerRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    multiplier: float
    gap: float
    power: float


class PowerResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    success: float
    rates: dict[str, float]
    tasks: int
    trials: int
    K: int
    calls: int
    simulations: int
    alpha: float
    target_power: float
    seed: int
    detectable_gap: float | None
    detectable_multiplier: float | None
    rows: list[PowerRow]
    max_multiplier: float = 10.0
    """The largest amplification scanned (no detectable gap: none up to it reached power)."""
    note: str = ""
    """Words, left empty: `flatscore power` says what was found (`cli.commands_analyze`)."""


def true_gap(success: float, rate: float, multiplier: float, calls: int, k: int) -> float:
    """Gap(K) implied by the model for an arm whose failure rate is multiplier × rate."""
    arm_rate = min(1.0, multiplier * rate)
    return float(success * (binom.cdf(k, calls, rate) - binom.cdf(k, calls, arm_rate)))


def simulated_power(
    success: float,
    rate: float,
    multiplier: float,
    *,
    tasks: int,
    trials: int,
    calls: int,
    k: int,
    simulations: int,
    alpha: float,
    rng: np.random.Generator,
) -> float:
    """Share of simulated studies whose paired test detects the arm's drop at K."""
    shape = (simulations, tasks, trials)
    q = rng.beta(
        success * TASK_CONCENTRATION, (1 - success) * TASK_CONCENTRATION, (simulations, tasks, 1)
    )
    arm_rate = min(1.0, multiplier * rate)
    ref = (rng.random(shape) < q) & (rng.binomial(calls, rate, shape) <= k)
    arm = (rng.random(shape) < q) & (rng.binomial(calls, arm_rate, shape) <= k)
    d = ref.mean(axis=2) - arm.mean(axis=2)  # per-task differences, one row per study
    hits = (paired_test(d) < alpha) & (d.sum(axis=1) > 0)
    return float(hits.mean())


def power_analysis(
    success: float,
    rates: dict[str, float],
    *,
    tasks: int,
    trials: int = 1,
    k: int = defaults.TIGHT_K,
    calls: int = 10,
    simulations: int = 500,
    alpha: float = defaults.ALPHA,
    target_power: float = 0.8,
    seed: int = defaults.ANALYSIS_SEED,
    max_multiplier: float = 10.0,
    grid: int = 24,
    refine: int = 4,
) -> PowerResult:
    """Scan amplification multipliers 1.05..max_multiplier (geometric grid) until power ≥
    target, then bisect `refine` times between the last miss and the first hit."""
    if not 0 < success < 1:
        raise ValueError("success must be in (0, 1)")
    rate = float(sum(rates.values()))
    if not 0 < rate < 1:
        raise ValueError("the summed per-call error rates must be in (0, 1)")
    rng = np.random.default_rng(seed)

    def row(m: float) -> PowerRow:
        pw = simulated_power(
            success, rate, m, tasks=tasks, trials=trials, calls=calls, k=k,
            simulations=simulations, alpha=alpha, rng=rng,
        )  # fmt: skip
        return PowerRow(multiplier=m, gap=true_gap(success, rate, m, calls, k), power=pw)

    rows: list[PowerRow] = []
    found: PowerRow | None = None
    lo = 1.0
    for m in np.geomspace(1.05, max_multiplier, grid):
        rows.append(row(float(m)))
        if rows[-1].power >= target_power:
            found = rows[-1]
            break
        lo = float(m)
    if found is not None:  # refine between the last miss and the first hit (bisection)
        hi = found.multiplier
        for _ in range(refine):
            mid = float(np.sqrt(lo * hi))
            rows.append(row(mid))
            if rows[-1].power >= target_power:
                found, hi = rows[-1], mid
            else:
                lo = mid
        rows.sort(key=lambda r: r.multiplier)
    return PowerResult(
        success=success,
        rates=dict(sorted(rates.items())),
        tasks=tasks,
        trials=trials,
        K=k,
        calls=calls,
        simulations=simulations,
        alpha=alpha,
        target_power=target_power,
        seed=seed,
        detectable_gap=found.gap if found else None,
        detectable_multiplier=found.multiplier if found else None,
        rows=rows,
        max_multiplier=max_multiplier,
    )
