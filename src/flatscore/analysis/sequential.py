"""Sequential verdicts: each comparison decided at the first planned look that settles it,
with every error rate controlled over all looks (docs/analysis.md, "Sequential verdicts").

A comparison (an arm against its cell's reference) is read task by task, in a fixed order;
looks come every `look_every` paired tasks and at the maximum (the tasks the fixed design
has). At each look four one-sided hypotheses are tested on the tasks read so far, with the
per-task statistics of the fixed design:
- **damage**: the success gap at the default budget above 0 (`paired_score.
  paired_one_sided`, the statistic of the fixed design's paired test; α/2, as the fixed
  design's two-sided test at α);
- **equivalence**: the gap inside ±margin (both one-sided tests of TOST, α each);
- **amplified**: the all-channel failed-call ratio above 1 (`rate_ratio.
  log_ratio_jackknife`, t(n − 1); α/2);
- **bounded**: that ratio below `ratio_margin` (α).
Each test has group-sequential boundaries from the Hwang–Shih–DeCani spending function with
parameter `gamma` (`spending`), at its own level; a rejection is final. Damage and
amplification are corrected across the study's comparisons by Holm's procedure in its
group-sequential form (Maurer & Bretz 2013): each open hypothesis of the family is tested at
α_family / (hypotheses not yet rejected), with boundaries recomputed for that level, so a
rejection passes its share on to the others at the following tests. Equivalence and the
bound are not corrected, as TOST is not in the fixed design (each claim is an
intersection–union test at α).

A comparison stops at the first look where damage is decided ("visible damage"), or where
equivalence is decided together with amplification ("flat score, amplified failures") or
with the bound ("no damage detected"). Otherwise it runs to its maximum, where the last look
spends what the spending function has left, and ends "inconclusive". A flat score alone
never stops a comparison.

Everything is vectorised over leading axes (studies × comparisons): the simulation test
decides thousands of studies at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import Field
from scipy.stats import norm
from scipy.stats import t as student_t

from flatscore import defaults
from flatscore.analysis.outputs import AnalysisModel
from flatscore.analysis.paired_score import paired_one_sided
from flatscore.analysis.rate_ratio import log_ratio_jackknife
from flatscore.analysis.spending import hsd_boundaries

SequentialVerdict = Literal[
    "visible damage", "no damage detected", "flat score, amplified failures", "inconclusive"
]
VERDICTS: tuple[SequentialVerdict, ...] = (
    "inconclusive",
    "visible damage",
    "flat score, amplified failures",
    "no damage detected",
)
"""Codes 0–3 of `Decisions.verdict`."""
TESTS = ("damage", "equivalent_low", "equivalent_high", "amplified", "bounded")


class SequentialDesign(AnalysisModel):
    """What a sequential study plans: looks, margins, levels and the spending function."""

    look_every: int = Field(defaults.SEQUENTIAL_LOOK_EVERY, ge=1)
    margin: float = Field(defaults.TOST_MARGIN, gt=0, lt=1)
    ratio_margin: float = Field(defaults.SEQUENTIAL_RATIO_MARGIN, gt=1)
    alpha: float = Field(defaults.ALPHA, gt=0, lt=1)
    gamma_damage: float = defaults.SEQUENTIAL_GAMMA_DAMAGE
    """Hwang–Shih–DeCani parameter of the damage and amplification tests' spending."""
    gamma_equivalence: float = defaults.SEQUENTIAL_GAMMA_EQUIVALENCE
    """… and of the equivalence and bound tests'."""

    def gamma(self, test: str) -> float:
        return self.gamma_damage if test in ("damage", "amplified") else self.gamma_equivalence

    def levels(self) -> dict[str, float]:
        """Each test's one-sided level before multiplicity correction."""
        a = self.alpha
        return {
            "damage": a / 2,
            "equivalent_low": a,
            "equivalent_high": a,
            "amplified": a / 2,
            "bounded": a,
        }


def look_counts(tasks: int, every: int) -> list[int]:
    """Paired tasks read at each look: every `every` tasks, and the maximum."""
    if tasks < 1:
        return []
    return [*range(every, tasks, every), tasks]


def boundaries(tasks: int, design: SequentialDesign, test: str, level: float) -> np.ndarray:
    """Z-scale boundaries of `test` at the looks of a comparison with `tasks` paired tasks."""
    fractions = tuple(n / tasks for n in look_counts(tasks, design.look_every))
    return hsd_boundaries(fractions, level, design.gamma(test))


@dataclass(frozen=True)
class LookStats:
    """One-sided Z statistics (Φ⁻¹ of 1 − p; −inf where a test does not exist) per test, each
    (..., looks)."""

    z: dict[str, np.ndarray]
    counts: list[int]
    maximum: int
    """Paired tasks at the design's maximum (the last look's count when the data reach it)."""


def _z(p: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(p), -np.inf, norm.isf(np.nan_to_num(p, nan=1.0)))


def look_stats(
    differences: np.ndarray,
    failed_arm: np.ndarray,
    calls_arm: np.ndarray,
    failed_ref: np.ndarray,
    calls_ref: np.ndarray,
    design: SequentialDesign,
    maximum: int | None = None,
) -> LookStats:
    """The statistics at every look of tasks read in order (last axis: tasks, in reading
    order). `differences` are per-task success differences ref − arm at the default budget;
    the others per-task mean failed agent calls and agent tool calls. `maximum`: the
    design's maximum when the data stop short of it (a run still going): only the planned
    looks the data reach are taken."""
    d = np.asarray(differences, dtype=np.float64)
    rates = (failed_arm, calls_arm, failed_ref, calls_ref)
    parts = [np.asarray(a, dtype=np.float64) for a in rates]
    n_max = max(maximum or 0, d.shape[-1])
    counts = [c for c in look_counts(n_max, design.look_every) if c <= d.shape[-1]]
    out: dict[str, list[np.ndarray]] = {name: [] for name in TESTS}
    log_margin = float(np.log(design.ratio_margin))
    for n in counts:
        head = d[..., :n]
        out["damage"].append(_z(paired_one_sided(head, 0.0, upper=True)))
        out["equivalent_low"].append(_z(paired_one_sided(head, -design.margin, upper=True)))
        out["equivalent_high"].append(_z(paired_one_sided(head, design.margin, upper=False)))
        with np.errstate(invalid="ignore", divide="ignore"):
            lr, se = log_ratio_jackknife(*(a[..., :n] for a in parts))
            ok = np.isfinite(lr) & np.isfinite(se) & (se > 0)
            df = max(n - 1, 1)
            amp = student_t.sf(np.where(ok, lr / np.where(ok, se, 1.0), 0.0), df)
            bound = student_t.cdf(np.where(ok, (lr - log_margin) / np.where(ok, se, 1.0), 0.0), df)
        out["amplified"].append(_z(np.where(ok, amp, np.nan)))
        out["bounded"].append(_z(np.where(ok, bound, np.nan)))
    lead = d.shape[:-1]
    z = {k: np.stack(v, axis=-1) if v else np.zeros((*lead, 0)) for k, v in out.items()}
    return LookStats(z=z, counts=counts, maximum=n_max)


@dataclass(frozen=True)
class Decisions:
    """Per study and comparison (leading axes): the verdict code (`VERDICTS`), whether it was
    decided before the maximum ran out, and the look index at which reading stopped."""

    verdict: np.ndarray
    decided: np.ndarray
    look: np.ndarray
    damage: np.ndarray
    equivalent: np.ndarray
    amplified: np.ndarray
    bounded: np.ndarray

    def tasks(self, counts: list[list[int]]) -> np.ndarray:
        """Paired tasks read at the stop, given each comparison's look counts."""
        width = max(1, *map(len, counts))
        table = np.array([(c or [0]) + [(c or [0])[-1]] * (width - len(c or [0])) for c in counts])
        return np.take_along_axis(
            np.broadcast_to(table, (*self.look.shape, table.shape[-1])),
            self.look[..., None],
            axis=-1,
        )[..., 0]


def decide(stats: list[LookStats], design: SequentialDesign) -> Decisions:
    """Run the sequential procedure over comparisons (one `LookStats` each; their leading
    axes are the studies and must agree). Holm across the comparisons for damage and
    amplification (see the module docstring)."""
    m = len(stats)
    if m == 0:
        raise ValueError("no comparison to decide")
    lengths = [len(s.counts) for s in stats]
    looks = max(1, *lengths)
    lead = stats[0].z["damage"].shape[:-1]
    levels = design.levels()

    def padded(test: str) -> np.ndarray:  # (..., m, looks), −inf after a comparison's end
        cols = []
        for s in stats:
            z = s.z[test]
            pad = np.full((*lead, looks - z.shape[-1]), -np.inf)
            cols.append(np.concatenate([z, pad], axis=-1))
        return np.stack(cols, axis=-2)

    def bounds(test: str, level: float) -> np.ndarray:  # (m, looks), +inf after the end
        rows = []
        for s in stats:
            b = boundaries(s.maximum, design, test, level)[: len(s.counts)]
            rows.append(np.concatenate([b, np.full(looks - b.size, np.inf)]))
        return np.array(rows)

    z = {t: padded(t) for t in TESTS}
    # Holm: boundaries at α/h for h = 1..m hypotheses still open (index h).
    holm = {
        t: np.stack([bounds(t, levels[t] / max(h, 1)) for h in range(m + 1)])
        for t in ("damage", "amplified")
    }
    plain = {t: bounds(t, levels[t]) for t in ("equivalent_low", "equivalent_high", "bounded")}
    shape = (*lead, m)
    kinds = ("damage", "amplified", "equivalent", "bounded")
    rejected = {t: np.zeros(shape, dtype=bool) for t in kinds}
    stopped = np.zeros(shape, dtype=bool)
    look = np.zeros(shape, dtype=np.int64)
    verdict = np.zeros(shape, dtype=np.int64)
    last = np.array(lengths) - 1
    comp = np.arange(m)
    for k in range(looks):
        active = ~stopped & (k <= last)
        for test in ("damage", "amplified"):
            rej = rejected[test]
            for _ in range(m):
                open_h = m - rej.sum(axis=-1, keepdims=True)  # (..., 1)
                c = holm[test][open_h, comp, k]  # (..., m)
                new = active & ~rej & (z[test][..., k] >= c)
                if not new.any():
                    break
                rej |= new
        eq = (z["equivalent_low"][..., k] >= plain["equivalent_low"][:, k]) & (
            z["equivalent_high"][..., k] >= plain["equivalent_high"][:, k]
        )
        rejected["equivalent"] |= active & eq
        rejected["bounded"] |= active & (z["bounded"][..., k] >= plain["bounded"][:, k])
        eqv = rejected["equivalent"]
        code = np.where(
            rejected["damage"],
            1,
            np.where(eqv & rejected["amplified"], 2, np.where(eqv & rejected["bounded"], 3, 0)),
        )
        stop = active & ((code > 0) | (k == last))
        verdict = np.where(stop, code, verdict)
        look = np.where(stop, k, look)
        stopped |= stop
    return Decisions(
        verdict=verdict,
        decided=verdict > 0,
        look=look,
        damage=rejected["damage"],
        equivalent=rejected["equivalent"],
        amplified=rejected["amplified"],
        bounded=rejected["bounded"],
    )
