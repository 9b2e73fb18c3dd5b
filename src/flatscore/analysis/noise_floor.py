"""The noise floor (docs/analysis.md, "Noise floor"): what the reference gives against itself.

Two runs of the same model differ by chance alone, so a diagnostic such as ρ or the novel
share says nothing about an arm until it is set against the reference compared with itself.
With ≥ 2 trials per task the reference's trials are split into two balanced halves (every
split, in both orientations; 4 trials give 3 distinct splits) and every diagnostic is
computed half against half, on the cell's paired tasks.

Halves hold half the trials, so half-against-half ρ is lower and the novel share higher than
a full-size comparison would give by chance. The arm is therefore judged at the floor's own
size: the reference's half against the arm's other half (the same trial labels, so seed
coupling helps neither side), averaged over the same splits. The excess (arm − floor at half
size) gets a task-bootstrap interval on the cell's resamples, paired with the floor; the arm
is beyond the floor only when that interval excludes 0. Signed differences (Gap(K), channel
ratios, recovery and trajectory differences) are centred on 0 (or ×1) by symmetry: their
floor is the mean absolute difference (ratios: on the log scale) over the splits, also shown
rescaled by 1/√2 to the full trial count (exact for independent trials). The floor is itself
one draw, so it comes with its task-bootstrap standard error: on each of the cell's first
resamples, the size of each split's difference minus the data's, averaged over the splits as
the floor is. That floor is for reading (an arm is called beyond it only past the floor plus
twice its standard error, `FloorStat.beyond_full_trials`); decisions on them stay with the
comparison's own intervals, which already measure chance at the arm's size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Literal

import numpy as np

from flatscore.analysis.channels import CHANNELS
from flatscore.analysis.facts import TRAJECTORY_METRICS, EpisodeFacts
from flatscore.analysis.invariance import rowwise_spearman
from flatscore.analysis.result import FloorNote, FloorStat, Invariance, NoiseFloor
from flatscore.analysis.stats import percentile_ci, ratio
from flatscore.analysis.task_matrix import MALFORMED, TaskMatrix, task_matrix

MIN_REFERENCE_NAMES = 20
"""The fewest distinct hallucinated names the reference must produce on the paired tasks for
the names' floor to decide anything: the decision is calibrated (tests/analysis/
test_noise_floor.py) on a reference with 20 names; with fewer, ρ ranks a handful of names
and the novel share of a half rests on a handful of calls, and invariance is untestable."""

FLOOR_RESAMPLES = 1000
"""The floor's intervals and standard errors use the first 1,000 of the cell's bootstrap
resamples (ρ is ranked once per split and resample; 1,000 keeps the analysis within its speed
target)."""

MIN_DEFINED_SHARE = 0.5
"""A signed floor's standard error needs the floor defined on at least half the resamples
(a sparse channel can vanish from a resample): the spread of a few would describe another
statistic."""

Split = tuple[tuple[int, ...], tuple[int, ...]]
LEVEL = ("spearman_rho", "novel_fraction")
Kind = Literal["level", "difference", "ratio"]
Values = dict[str, np.ndarray]


def balanced_splits(trials: Sequence[int]) -> list[Split]:
    """Every ordered split of the distinct trial labels into halves of ⌊n/2⌋ and ⌈n/2⌉
    trials, both orientations ([] below 2 trials). 4 trials: 6 ordered, 3 distinct."""
    labels = sorted(set(trials))
    out: list[Split] = []
    if len(labels) < 2:
        return out
    for first in combinations(labels, len(labels) // 2):
        rest = tuple(t for t in labels if t not in first)
        out.append((first, rest))
        if len(labels) % 2:
            out.append((rest, first))
    return out


@dataclass(frozen=True)
class _Sums:
    """Task sums of one group of episodes: per-task means (… × columns), per-name call counts
    (… × names) and the number of tasks; a leading axis when bootstrapped."""

    rows: np.ndarray
    names: np.ndarray
    tasks: np.ndarray


def _sums(
    m: TaskMatrix,
    mask: np.ndarray,
    names: np.ndarray,
    weights: np.ndarray | None,
    *,
    rows: bool = True,
) -> _Sums:
    """`m`'s sums over the tasks in `mask`, names restricted to the columns `names` (the
    union of a comparison; the others are zero on both sides and rank nowhere); one row per
    resample of `weights` (task counts), else one row. `rows=False` leaves the per-task
    means out (only the names are needed)."""
    counts = (m.name_means[:, names] * m.episodes[:, None]) * mask[:, None]
    means = m.means * mask[:, None] if rows else np.empty((len(mask), 0))
    if weights is None:
        return _Sums(means.sum(axis=0)[None], counts.sum(axis=0)[None], mask.sum()[None])
    return _Sums(weights @ means, weights @ counts, weights @ mask)


def _named(*matrices: TaskMatrix) -> np.ndarray:
    """Name columns any of `matrices` hallucinated."""
    return np.flatnonzero(np.any([m.name_means.any(axis=0) for m in matrices], axis=0))


def _level(ref: _Sums, arm: _Sums, *, rho: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """ρ and novel share of `arm` against `ref`, one value per row (`rho` when already
    known: ρ is symmetric, the novel share is not)."""
    a, b = ref.names, arm.names
    total = b.sum(axis=1)
    return {
        "spearman_rho": rowwise_spearman(a, b) if rho is None else rho,
        "novel_fraction": ratio(np.where(a == 0, b, 0.0).sum(axis=1), total),
    }


def _signed(
    ref: _Sums, arm: _Sums, cols: dict[str, int], gap_ks: Sequence[int]
) -> dict[str, np.ndarray]:
    """Gap(K), the all-channel and per-channel failure ratios, recovery and trajectory
    differences of `arm` against `ref` (the comparison's definitions), one value per row."""

    def rate(s: _Sums, num: str, den: str) -> np.ndarray:
        return ratio(s.rows[:, cols[num]], s.rows[:, cols[den]])

    out = {
        f"gap.K{k}": ratio(ref.rows[:, cols[f"S{k}"]] - arm.rows[:, cols[f"S{k}"]], ref.tasks)
        for k in gap_ks
    }
    with np.errstate(divide="ignore", invalid="ignore"):
        out["failed_calls"] = rate(arm, "agent_failed", "calls") / rate(
            ref, "agent_failed", "calls"
        )
        for ch in CHANNELS:
            den = "attempts" if ch == MALFORMED else "calls"
            out[f"channel.{ch}"] = rate(arm, ch, den) / rate(ref, ch, den)
    out["recovery_difference"] = rate(arm, "recovered", "agent_failed") - rate(
        ref, "recovered", "agent_failed"
    )
    out["repeat_difference"] = rate(arm, "repeats", "agent_failed") - rate(
        ref, "repeats", "agent_failed"
    )
    out["reissue_difference"] = rate(arm, "reissued", "calls") - rate(ref, "reissued", "calls")
    for m in TRAJECTORY_METRICS:
        out[f"trajectory.{m}"] = rate(arm, f"traj_{m}", "task") - rate(ref, f"traj_{m}", "task")
    return out


def _value(x: np.ndarray) -> float | None:
    v = float(x[0])
    return v if np.isfinite(v) else None


def _mean(values: list[np.ndarray]) -> np.ndarray:
    """Mean over splits, per row (NaN where no split gives a value)."""
    stacked = np.stack(values)
    finite = np.isfinite(stacked)
    n = finite.sum(axis=0)
    total = np.where(finite, stacked, 0.0).sum(axis=0)
    return np.where(n > 0, total / np.maximum(n, 1), np.nan)


class CellFloor:
    """The reference's half matrices of one cell, built once and shared by its arms."""

    def __init__(
        self,
        ref: Sequence[EpisodeFacts],
        tasks: Sequence[str],
        budgets: Sequence[int],
        count: str,
        names: Sequence[str],
        weights: np.ndarray | None,
    ) -> None:
        self.tasks, self.budgets, self.count, self.names = tasks, budgets, count, names
        self.splits = balanced_splits([f.trial for f in ref])
        self.weights = None if weights is None else weights[:FLOOR_RESAMPLES]
        self.ref = self.halves(ref)
        self._floors: dict[tuple[Split, bytes], tuple[Values, Values | None]] = {}

    def floor(
        self, split: Split, mask: np.ndarray, cols: dict[str, int], gap_ks: Sequence[int]
    ) -> tuple[Values, Values | None]:
        """Reference half vs reference half on one split's tasks: every diagnostic, and
        every diagnostic on each resample (None without resamples); cached, arms usually
        share it."""
        key = (split, mask.tobytes())
        if key not in self._floors:
            r1, r2 = self.ref[split[0]], self.ref[split[1]]
            names = _named(r1, r2)
            s1, s2 = (_sums(m, mask, names, None) for m in (r1, r2))
            boot = None
            if self.weights is not None:
                # The other orientation of the same split has the same bootstrapped ρ
                # (ρ is symmetric, to the bit): rank each resample once per split.
                other = self._floors.get(((split[1], split[0]), mask.tobytes()))
                rho = None if other is None or other[1] is None else other[1]["spearman_rho"]
                b1, b2 = (_sums(m, mask, names, self.weights) for m in (r1, r2))
                boot = {**_level(b1, b2, rho=rho), **_signed(b1, b2, cols, gap_ks)}
            self._floors[key] = ({**_level(s1, s2), **_signed(s1, s2, cols, gap_ks)}, boot)
        return self._floors[key]

    def halves(self, facts: Sequence[EpisodeFacts]) -> dict[tuple[int, ...], TaskMatrix]:
        """One task matrix per half that any split uses, pooled from one matrix per trial
        (each episode is read once, whatever the number of splits)."""
        per_trial = {
            t: task_matrix(
                [f for f in facts if f.trial == t], self.tasks, self.budgets, self.count, self.names
            )
            for t in {t for split in self.splits for half in split for t in half}
        }
        wanted = {half for split in self.splits for half in split}
        return {half: _pool([per_trial[t] for t in half]) for half in wanted}


def _pool(parts: Sequence[TaskMatrix]) -> TaskMatrix:
    """The task matrix of the union of disjoint episode groups (per-task means re-weighted
    by each group's episode count)."""
    episodes = np.sum([m.episodes for m in parts], axis=0)
    scale = np.where(episodes > 0, 1.0 / np.maximum(episodes, 1.0), 0.0)[:, None]
    means = np.sum([m.means * m.episodes[:, None] for m in parts], axis=0) * scale
    names = np.sum([m.name_means * m.episodes[:, None] for m in parts], axis=0) * scale
    first = parts[0]
    return TaskMatrix(first.tasks, first.columns, means, first.names, names, episodes)


def noise_floor(
    cell: CellFloor,
    ref_full: TaskMatrix,
    arm_full: TaskMatrix,
    arm: Sequence[EpisodeFacts],
    gap_ks: Sequence[int],
    confidence: float,
) -> NoiseFloor:
    """Every diagnostic of one arm next to the reference's floor (module docstring)."""
    cols = dict(ref_full.columns)
    everything = np.ones(len(cell.tasks))
    names = _named(ref_full, arm_full)
    s_ref, s_arm = (_sums(m, everything, names, None) for m in (ref_full, arm_full))
    full = {**_level(s_ref, s_arm), **_signed(s_ref, s_arm, cols, gap_ks)}
    if not cell.splits:
        return NoiseFloor(
            splits=0,
            method="",  # words: the report's (`report.floor_text`)
            invariance_reason="",
            diagnostics={k: FloorStat(kind=_kind(k), arm=_value(v)) for k, v in full.items()},
            invariance="not decided",
        )
    arm_halves = cell.halves(arm)
    floor_pt: dict[str, list[np.ndarray]] = {}
    floor_bt: dict[str, list[np.ndarray]] = {}
    arm_pt: dict[str, list[np.ndarray]] = {}
    arm_bt: dict[str, list[np.ndarray]] = {}
    for first, second in cell.splits:
        r1, r2, a2 = cell.ref[first], cell.ref[second], arm_halves[second]
        mask = ((r1.episodes > 0) & (r2.episodes > 0) & (a2.episodes > 0)).astype(np.float64)
        floor_pt_s, floor_bt_s = cell.floor((first, second), mask, cols, gap_ks)
        _add(floor_pt, floor_pt_s)
        names = _named(r1, a2)
        _add(arm_pt, _level(*(_sums(m, mask, names, None) for m in (r1, a2))))
        if cell.weights is not None:
            assert floor_bt_s is not None
            _add(floor_bt, floor_bt_s)
            arm_sums = (_sums(m, mask, names, cell.weights, rows=False) for m in (r1, a2))
            _add(arm_bt, _level(*arm_sums))
    stats: dict[str, FloorStat] = {}
    for key, value in full.items():
        if key in LEVEL:
            stats[key] = _level_stat(key, value, floor_pt, arm_pt, floor_bt, arm_bt, confidence)
        else:
            stats[key] = _signed_stat(key, value, floor_pt[key], floor_bt.get(key))
    half = len(cell.splits[0][0]), len(cell.splits[0][1])
    distinct = len(cell.splits) // 2  # each split appears in both orientations
    own = int((ref_full.name_means.sum(axis=0) > 0).sum())
    verdict = _invariance(stats, cell.weights is not None)
    if own < MIN_REFERENCE_NAMES:
        verdict = "not decided"
    return NoiseFloor(
        splits=distinct,
        trials_per_half=list(half),
        resamples=None if cell.weights is None else len(cell.weights),
        method="",  # words: the report's (`report.floor_text`)
        diagnostics=stats,
        invariance=verdict,
        invariance_reason="",
        reference_names=own,
    )


def _kind(key: str) -> Kind:
    if key in LEVEL:
        return "level"
    return "ratio" if key == "failed_calls" or key.startswith("channel.") else "difference"


def _add(into: dict[str, list[np.ndarray]], values: dict[str, np.ndarray]) -> None:
    for k, v in values.items():
        into.setdefault(k, []).append(v)


def _level_stat(
    key: str,
    value: np.ndarray,
    floor_pt: dict[str, list[np.ndarray]],
    arm_pt: dict[str, list[np.ndarray]],
    floor_bt: dict[str, list[np.ndarray]],
    arm_bt: dict[str, list[np.ndarray]],
    confidence: float,
) -> FloorStat:
    floor, at_half = _value(_mean(floor_pt[key])), _value(_mean(arm_pt[key]))
    excess = None if floor is None or at_half is None else at_half - floor
    lo = hi = None
    why: FloorNote | None = None
    if excess is None:
        why = "names_in_half"
    elif floor_bt:
        lo, hi = percentile_ci(_mean(arm_bt[key]) - _mean(floor_bt[key]), confidence)
    else:
        why = "no_interval"
    return FloorStat(
        kind="level",
        arm=_value(value),
        floor=floor,
        arm_half=at_half,
        excess=excess,
        ci_low=lo,
        ci_high=hi,
        beyond_floor=None if lo is None or hi is None else bool(lo > 0 or hi < 0),
        note_code=why,
    )


def _signed_stat(
    key: str, value: np.ndarray, per_split: list[np.ndarray], boot: list[np.ndarray] | None
) -> FloorStat:
    """The floor of a signed diagnostic: its size over the splits and, with resamples
    (`boot`, per split), the standard error of that size over the task bootstrap."""
    kind = _kind(key)
    to_scale: Callable[[np.ndarray], np.ndarray] = np.log if kind == "ratio" else np.asarray
    with np.errstate(divide="ignore", invalid="ignore"):
        sizes = np.abs(to_scale(np.concatenate(per_split)))
    sizes = sizes[np.isfinite(sizes)]
    if sizes.size == 0:
        return FloorStat(kind=kind, arm=_value(value), note_code="undefined_halves")
    size = float(sizes.mean())
    se = None if boot is None else _floor_se(per_split, boot, log=kind == "ratio")
    back = (lambda x: float(np.exp(x))) if kind == "ratio" else float
    return FloorStat(
        kind=kind,
        arm=_value(value),
        floor=back(size),
        floor_full_trials=back(size / np.sqrt(2.0)),
        floor_se=se,
        floor_full_trials_se=None if se is None else se / np.sqrt(2.0),
    )


def _floor_se(
    points: Sequence[np.ndarray], boot: Sequence[np.ndarray], *, log: bool
) -> float | None:
    """Task-bootstrap standard error of a signed floor. `points` holds each split's
    difference (ratio when `log`) on the data, `boot` the same on every resample. The
    halves' true difference is 0 (×1) by symmetry, so each resample's floor is the mean over
    splits of |resampled − observed| (log ratios): the chance part of each difference, folded
    at 0 as the data's floor is. The standard error is the standard deviation of those
    floors (None when under `MIN_DEFINED_SHARE` of the resamples give one). The resampled
    differences as they are, not minus the data's, would overstate the floor's spread by
    15–30% (docs/analysis.md, "Noise floor")."""
    scale: Callable[[np.ndarray], np.ndarray] = np.log if log else np.asarray
    with np.errstate(divide="ignore", invalid="ignore"):
        chance = np.abs(np.stack([scale(b) - scale(p) for b, p in zip(boot, points, strict=True)]))
    finite = np.isfinite(chance)
    n = finite.sum(axis=0)
    sizes = np.where(finite, chance, 0.0).sum(axis=0)[n > 0] / n[n > 0]
    if sizes.size < 2 or sizes.size < MIN_DEFINED_SHARE * chance.shape[1]:
        return None
    return float(np.std(sizes, ddof=1))


def _invariance(stats: dict[str, FloorStat], intervals: bool) -> Invariance:
    """Invariance and novelty decided against the floor: beyond it only where the excess
    interval excludes 0 (ρ below the floor, or novel share above it). Why, in words, is the
    report's (`flatscore.report.floor_text`)."""
    rho, novel = stats["spearman_rho"], stats["novel_fraction"]
    if not intervals or (rho.beyond_floor is None and novel.beyond_floor is None):
        return "not decided"
    if worse_than_floor(rho, novel):
        return "beyond the noise floor"
    return "not beyond the noise floor"


def worse_than_floor(rho: FloorStat, novel: FloorStat) -> list[str]:
    """Which of ρ and the novel share lie beyond the floor in the damaging direction (ρ
    below it, the novel share above it)."""
    worse = []
    if rho.beyond_floor and (rho.ci_high or 0.0) < 0:
        worse.append("ρ")
    if novel.beyond_floor and (novel.ci_low or 0.0) > 0:
        worse.append("novel share")
    return worse
