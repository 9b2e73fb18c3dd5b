"""`flatscore power --sequential`: how many tasks a sequential study needs to decide, from a
pilot's run files (docs/sequential.md, "Sizing a sequential study").

The pilot gives what the fixed-design sizing has to assume: each task's reference success
at the default budget (its difficulty), its failed-call rate and calls per episode, and how
often an arm's trial agrees with the reference's beyond chance (the discordance that pairing
removes). A simulated study draws its tasks from the pilot's (with replacement, up to the
design's maximum); the reference solves a trial of task t with probability q_t (the pilot's,
shrunk by half a trial towards ½ so that no task is certain), the arm with q_t·(1 − gap/s̄)
(s̄: the pilot's mean success, so the mean gap is `gap`), each arm trial reusing its
reference trial's uniform with probability `coupling` (common random numbers, as the
simulation of docs/analysis.md); failed calls per episode are Binomial(calls_t, r_t) with
the pilot's per-task numbers, the same in both arms (no amplification: the sizing is for
the success gap, and "no damage detected" still needs the failure ratio bounded). Each
simulated study is decided by the sequential procedure (`sequential.decide`, one
comparison) at the planned looks.

Coupling from the pilot: with an arm beside the reference, per-task differences d_t of
success (the pilot's gap removed) have E[d_t²] = (1 − c)·E[2q(1 − q)]/trials under this
model, so c = 1 − trials·mean(d_t²) / mean(2 q̂(1 − q̂)), clipped to [0, 1]; with the
reference alone, c = 0 (independent trials: the cautious answer).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from flatscore import defaults
from flatscore.analysis.channels import load_rules
from flatscore.analysis.facts import EpisodeFacts, episode_facts
from flatscore.analysis.sequential import VERDICTS, SequentialDesign, decide, look_stats
from flatscore.analysis.settings import AnalysisSettings
from flatscore.analysis.task_matrix import task_matrix
from flatscore.episode import Episode
from flatscore.errors import InputError


class CoupledPair(BaseModel):
    """Where the pilot's coupling was estimated: `arm` against `reference` in the cell
    (`model`, `domain`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    arm: str
    reference: str
    model: str
    domain: str


class Pilot(BaseModel):
    """Per-task numbers of a pilot's reference (and, when there is one, the coupling its arm
    shows)."""

    model_config = ConfigDict(extra="forbid")

    success: list[float]
    """Per-task mean success at the default budget."""
    failure_rate: list[float]
    """Per-task failed agent calls / agent tool calls."""
    calls: list[float]
    """Per-task mean agent tool calls per episode."""
    trials: int
    coupling: float
    coupled: CoupledPair | None = None
    """The pair the coupling was estimated on; None: none (a pilot read from runs with no
    arm beside the reference: c = 0, independent trials). In words:
    `report.sequential_text.coupling_source`."""


class SequentialPowerRow(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gap: float
    decided: float
    """Share of simulated studies decided before or at the maximum."""
    verdicts: dict[str, float]
    median_tasks: float
    mean_tasks: float
    """Expected paired tasks read (undecided studies at the maximum)."""
    mean_episodes: float
    """Expected episodes of the comparison (arm and reference)."""


class SequentialPowerResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pilot_tasks: int
    pilot_trials: int
    coupling: float
    coupled: CoupledPair | None
    max_tasks: int
    trials: int
    simulations: int
    seed: int
    rows: list[SequentialPowerRow]


def estimate_coupling(success_ref: np.ndarray, success_arm: np.ndarray, trials: int) -> float:
    """c = 1 − trials·mean(d²) / mean(2q̂(1 − q̂)) on per-task means (the pilot's gap
    removed), clipped to [0, 1]; 0 when no task varies."""
    d = np.asarray(success_ref, float) - np.asarray(success_arm, float)
    d = d - d.mean()
    q = (np.asarray(success_ref, float) + np.asarray(success_arm, float)) / 2
    spread = float(np.mean(2 * q * (1 - q)))
    if spread <= 0:
        return 0.0
    return float(np.clip(1 - trials * float(np.mean(d**2)) / spread, 0.0, 1.0))


def simulate_studies(
    pilot: Pilot,
    gap: float,
    *,
    max_tasks: int,
    trials: int,
    simulations: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(studies × tasks) per-task arrays for `look_stats`: success differences ref − arm,
    failed calls and calls of the arm and the reference (means over trials)."""
    n = len(pilot.success)
    pick = rng.integers(0, n, (simulations, max_tasks))
    k = np.asarray(pilot.success) * pilot.trials
    q = ((k + 0.5) / (pilot.trials + 1))[pick][..., None]
    mean_success = float(np.mean((k + 0.5) / (pilot.trials + 1)))
    arm_q = np.clip(q * (1 - gap / mean_success), 0.0, 1.0) if mean_success > 0 else q
    u = rng.random((simulations, max_tasks, trials))
    v = np.where(rng.random(u.shape) < pilot.coupling, u, rng.random(u.shape))
    diff = (u < q).mean(-1) - (v < arm_q).mean(-1)
    calls = np.maximum(np.rint(np.asarray(pilot.calls)), 1.0)[pick]
    rate = np.clip(np.asarray(pilot.failure_rate), 0.0, 1.0)[pick]
    counts = calls.astype(np.int64)[..., None]
    fail_ref = rng.binomial(np.broadcast_to(counts, u.shape), rate[..., None]).mean(-1)
    fail_arm = rng.binomial(np.broadcast_to(counts, u.shape), rate[..., None]).mean(-1)
    return diff, fail_arm, calls, fail_ref, calls


def sequential_power(
    pilot: Pilot,
    gaps: Sequence[float],
    *,
    max_tasks: int,
    trials: int | None = None,
    simulations: int = 500,
    seed: int = 0,
    design: SequentialDesign | None = None,
) -> SequentialPowerResult:
    """Per gap: how often a sequential study of up to `max_tasks` tasks decides, which way,
    and the tasks and episodes it reads on average."""
    if len(pilot.success) < 2:
        raise ValueError("the pilot needs at least two tasks the reference ran")
    if max_tasks < 1 or simulations < 1:
        raise ValueError("max_tasks and simulations must be positive")
    design = design or SequentialDesign()
    trials = trials or pilot.trials
    rng = np.random.default_rng(seed)
    rows = []
    for gap in gaps:
        d, fail_arm, calls_arm, fail_ref, calls_ref = simulate_studies(
            pilot, gap, max_tasks=max_tasks, trials=trials, simulations=simulations, rng=rng
        )
        stats = look_stats(d, fail_arm, calls_arm, fail_ref, calls_ref, design)
        dec = decide([stats], design)
        tasks = dec.tasks([stats.counts])[:, 0].astype(float)
        verdict = dec.verdict[:, 0]
        rows.append(
            SequentialPowerRow(
                gap=float(gap),
                decided=float(dec.decided[:, 0].mean()),
                verdicts={VERDICTS[i]: float(np.mean(verdict == i)) for i in range(len(VERDICTS))},
                median_tasks=float(np.median(tasks)),
                mean_tasks=float(tasks.mean()),
                mean_episodes=float(2 * trials * tasks.mean()),
            )
        )
    return SequentialPowerResult(
        pilot_tasks=len(pilot.success),
        pilot_trials=pilot.trials,
        coupling=pilot.coupling,
        coupled=pilot.coupled,
        max_tasks=max_tasks,
        trials=trials,
        simulations=simulations,
        seed=seed,
        rows=rows,
    )


def pilot_from_episodes(
    episodes: Sequence[Episode],
    reference: str | None = None,
    arm: str | None = None,
    domain: str | None = None,
) -> Pilot:
    """The pilot's per-task numbers: the first cell (or the one of `domain`), its reference
    and, for the coupling, `arm` (default: the cell's first compared arm; none: c = 0)."""
    from flatscore.analysis.analyze import analyze  # the study driver: its reference and K

    result = analyze(
        episodes, AnalysisSettings(reference=reference, bootstrap=defaults.MIN_BOOTSTRAP)
    )
    cells = [c for c in result.cells if domain is None or c.domain == domain]
    if not cells:
        raise InputError(f"no cell of domain {domain!r} in the pilot", field="--domain")
    cell = cells[0]
    names = [c.arm for c in cell.comparisons]
    if arm is not None and arm not in names:
        raise InputError(
            f"arm {arm!r} is not compared in {cell.model} / {cell.domain} (arms: {names})",
            field="--arm",
        )
    other = arm or (names[0] if names else None)
    rules = load_rules()
    k = result.settings.default_K
    facts: dict[str, list[EpisodeFacts]] = {}
    for ep in episodes:
        if (ep.model, ep.domain) == (cell.model, cell.domain) and ep.arm in (
            cell.reference,
            other,
        ):
            fact = episode_facts(ep, rules)
            if not fact.infrastructure:
                facts.setdefault(ep.arm, []).append(fact)
    ref_facts = facts.get(cell.reference, [])
    tasks = sorted({f.task_id for f in ref_facts})
    if other is not None:
        tasks = sorted(set(tasks) & {f.task_id for f in facts.get(other, [])})
    ref = task_matrix(ref_facts, tasks, [k], result.settings.count)
    trials = max(1, round(float(np.mean(ref.episodes)))) if tasks else 1
    calls = ref.column("calls")
    rate = np.divide(ref.column("agent_failed"), calls, out=np.zeros_like(calls), where=calls > 0)
    if other is None:
        coupling, pair = 0.0, None
    else:
        alt = task_matrix(facts[other], tasks, [k], result.settings.count)
        coupling = estimate_coupling(ref.column(f"S{k}"), alt.column(f"S{k}"), trials)
        pair = CoupledPair(
            arm=other, reference=cell.reference, model=cell.model, domain=cell.domain
        )
    return Pilot(
        success=[float(x) for x in ref.column(f"S{k}")],
        failure_rate=[float(x) for x in rate],
        calls=[float(x) for x in calls],
        trials=trials,
        coupling=coupling,
        coupled=pair,
    )
