"""The simulation model of the sequential-verdict tests (tests/analysis/test_sequential.py,
the CLI replay test): synthetic comparisons, task by task; and chosen statistics for the
decision rules (`crossing_stats`, `rule_verdicts`).

Success at the default budget: the model of tests/analysis/test_coverage.py — task solve
probabilities q ~ Beta(c·s, c·(1 − s)), c = 4 (or the `concentration` given: 1.8 with
s = 0.5 is Beta(0.9, 0.9), tasks mostly near always or never solved); the arm solves with
q·(1 − gap/s); trials independent, or coupled (each arm trial reuses its reference trial's
uniform with probability 0.75, as common random numbers do where quantization changes some
episodes).
Failed calls: each episode makes `calls` agent tool calls; a task's per-call failure
probability is r = min(0.5, base·G), G ~ Gamma(2, 1/2) (mean 1: tasks differ), and the arm's
is ratio·r (≤ 1 for ratios up to 2, so the true ratio is exactly `ratio`); the arm's call
outcomes are coupled to the reference's in the same way as its trials. The reference's
failure rate per call is then ≈ 0.3, the study v1 reference's 0.33–0.41.
Channels: a failed call falls in channel j with the reference's shares `SHARES` (its place
in the call's uniform decides which, so the channels cost no extra draws and leave the
all-channel numbers as they were); the arm's per-call failure probability in channel j is
r·share_j·multiplier_j (every multiplier = `ratio` unless `channel_ratios` says otherwise),
so a planted single-channel amplification (×3 on the 5% channel) raises all failed calls by
×1.10 — study v2's planted control in telecom: ×3.03 on bad arguments, ×1.10 overall.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis_builders import episode
from flatscore.analysis.sequential import TESTS, VERDICTS, LookStats, SequentialDesign, decide
from flatscore.analysis.sequential_channels import ChannelCounts
from flatscore.episode import Episode

CONCENTRATION = 4.0
COUPLINGS = {"independent": 0.0, "coupled": 0.75}
SHARES = (0.05, 0.10, 0.20, 0.25, 0.40)
CHANNEL_NAMES = ("c5", "c10", "c20", "c25", "c40")
PLANTED = (3.0, 1.0, 1.0, 1.0, 1.0)
"""×3 on the 5% channel only: ×1.10 on all failed calls."""


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
    channel_ref: np.ndarray
    """(studies × channels × tasks) per-task mean failed calls per channel."""
    channel_arm: np.ndarray
    channel_failures_ref: np.ndarray
    """(studies × channels × tasks × trials) failed calls per episode and channel."""
    channel_failures_arm: np.ndarray

    def arrays(self) -> tuple[np.ndarray, ...]:
        return (self.differences, self.failed_arm, self.calls_arm, self.failed_ref, self.calls_ref)

    def channels(self) -> ChannelCounts:
        den = np.broadcast_to(self.calls_arm[:, None, :], self.channel_arm.shape)
        return ChannelCounts(CHANNEL_NAMES, self.channel_arm, den, self.channel_ref, den)


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
    channel_ratios: tuple[float, ...] | None = None,
    concentration: float = CONCENTRATION,
) -> Comparisons:
    q = rng.beta(concentration * s, concentration * (1 - s), (studies, tasks, 1))
    u = rng.random((studies, tasks, trials))
    v = np.where(rng.random(u.shape) < coupling, u, rng.random(u.shape))
    ok_ref, ok_arm = u < q, v < q * (1 - gap / s)
    r = np.minimum(0.5, base * rng.gamma(2.0, 0.5, (studies, tasks, 1, 1)))
    u = rng.random((studies, tasks, trials, calls))
    v = np.where(rng.random(u.shape) < coupling, u, rng.random(u.shape))
    shares = np.array(SHARES)
    mult = np.array(channel_ratios if channel_ratios is not None else (ratio,) * len(SHARES))
    arm_r = ratio * r if channel_ratios is None else r * float(shares @ mult)
    f_ref, f_arm = (u < r).sum(-1), (v < np.minimum(1.0, arm_r)).sum(-1)
    edges_ref = np.concatenate([[0.0], np.cumsum(shares[:-1]), [1.0]])
    edges_arm = np.concatenate([[0.0], np.cumsum(shares * mult)[:-1] / float(shares @ mult), [1.0]])
    # which channel a failed call falls in: its uniform's place below the failure threshold
    pos_ref, pos_arm = u / r, v / np.minimum(1.0, arm_r)
    ch_ref, ch_arm = _channel_counts(pos_ref, edges_ref), _channel_counts(pos_arm, edges_arm)
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
        channel_ref=ch_ref.mean(-1),
        channel_arm=ch_arm.mean(-1),
        channel_failures_ref=ch_ref,
        channel_failures_arm=ch_arm,
    )


def _channel_counts(pos: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """(studies × channels × tasks × trials) failed calls per channel: a call whose `pos`
    lies in [edges[j], edges[j + 1]) failed in channel j (pos ≥ 1: it did not fail). One
    bincount over every call, not a pass per channel (the simulation table's largest cost)."""
    channels = len(edges) - 1
    where = np.searchsorted(edges, pos, side="right") - 1  # channels (= not failed) for pos ≥ 1
    episodes = where.reshape(-1, where.shape[-1])
    keys = np.arange(len(episodes))[:, None] * (channels + 1) + episodes
    counts = np.bincount(keys.ravel(), minlength=len(episodes) * (channels + 1))
    per_episode = counts.reshape(*where.shape[:-1], channels + 1)[..., :channels]
    return np.moveaxis(per_episode, -1, 1)


def recorded_run(
    arms: dict[str, tuple[float, int | None]], tasks: int = 48, trials: int = 2, seed: int = 7
) -> list[Episode]:
    """A sequential run as `flatscore run` records it (`stopping: sequential`, the design's
    maximum `tasks`, each task's rank): the reference `ref` on every task, each arm with its
    true gap on its first tasks (None: all of them; fewer: the run stopped it there).
    Independent trials, s = 0.6; every arm drawn from the same seeded stream, so all share the
    reference's tasks and outcomes and differ only by their gap."""
    out: list[Episode] = []
    for i, (arm, (gap, ran)) in enumerate(arms.items()):
        c = simulate(np.random.default_rng(seed), 1, gap, tasks=tasks, trials=trials)
        sides = [(arm, c.outcomes_arm, c.failures_arm, ran)]
        if i == 0:
            sides.insert(0, ("ref", c.outcomes_ref, c.failures_ref, None))
        for name, ok, failed, last in sides:
            for t in range(tasks if last is None else last):
                for trial in range(trials):
                    f = int(failed[0, t, trial])
                    calls = [("get_user", "fail")] * f + [("get_user", "ok")] * (c.calls - f)
                    ep = episode(name, f"t{t:03d}", trial, calls, success=bool(ok[0, t, trial]))
                    meta = {"stopping": "sequential", "sequential_max_tasks": tasks, "task_rank": t}
                    out.append(ep.model_copy(update={"metadata": meta}))
    return out


# --- chosen statistics, for the decision rules -------------------------------------------

RULES = SequentialDesign(look_every=8, first_look=8)
"""The decision-rule tests' looks: every 8 tasks from 8 (the rules do not depend on them)."""


def crossing_stats(
    tasks: int = 32, channels: tuple[list[float], ...] = (), **crossing: int
) -> LookStats:
    """One comparison under `RULES` whose test `name` crosses its boundary from look
    `crossing[name]` on (and never before); tests not named never cross. `channels`: each
    channel's Z per look (none: no channel tested)."""
    counts = RULES.looks(tasks)
    z = {}
    for name in TESTS:
        at = crossing.get(name)
        row = np.full(len(counts), -1.0)
        if at is not None:
            row[at:] = 50.0
        z[name] = row[None, :]
    ch = np.array(channels, float)[None] if channels else None
    names = tuple(f"c{i}" for i in range(len(channels)))
    return LookStats(z=z, counts=counts, maximum=tasks, channels=ch, channel_names=names)


def rule_verdicts(stats: list[LookStats]) -> list[tuple[str, bool, int]]:
    """`decide` under `RULES`: each comparison's (verdict, decided, tasks read)."""
    d = decide(stats, RULES)
    tasks = d.tasks([s.counts for s in stats])[0]
    return [
        (VERDICTS[int(v)], bool(x), int(n))
        for v, x, n in zip(d.verdict[0], d.decided[0], tasks, strict=True)
    ]
