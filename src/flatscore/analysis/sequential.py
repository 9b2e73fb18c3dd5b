"""Sequential verdicts: each comparison decided at the first planned look that settles it,
with every error rate controlled over all looks (docs/analysis.md, "Sequential verdicts").

A comparison (an arm against its cell's reference) is read task by task, in a fixed order;
looks come every `look_every` paired tasks from about a quarter of the maximum on, and at the
maximum (the tasks the fixed design has; `SequentialDesign.looks`). At each look five
one-sided hypotheses are tested on the tasks read so far, with the
per-task statistics of the fixed design:
- **damage**: the success gap at the default budget above 0 (`paired_score.
  paired_one_sided`, the statistic of the fixed design's paired test; α/2, as the fixed
  design's two-sided test at α);
- **flat**: a drop beyond the margin ruled out (TOST's upper one-sided test, α; the fixed
  design's "flat score": a possible *gain* beyond the margin does not hold an arm back);
- **amplified**: the all-channel failed-call ratio above 1 (`rate_ratio.ratio_p`,
  the fixed design's task-clustered score test, t(n − 1); α/2);
- **bounded**: that ratio below `ratio_margin` or the extra failed calls per agent call
  below `difference_margin` (`rate_ratio.bound_p`: each at α/2, so the claim holds at α on
  whichever scale the study reaches);
- **channel amplified**, per channel of the fixed design's family: its rate ratio above 1
  (or, too sparse for a ratio, the exact sign test over tasks; `sequential_channels`; α/2).
Each test has group-sequential boundaries from the Hwang–Shih–DeCani spending function with
parameter `gamma` (`spending`), at its own level; a rejection is final. Damage,
amplification and the channels (every channel of every comparison: one family) are each
corrected across the study's comparisons by Holm's procedure in its group-sequential form
(Maurer & Bretz 2013): each open hypothesis of the family is tested at α_family /
(hypotheses not yet rejected), with boundaries recomputed for that level, so a rejection
passes its share on to the others at the following tests. The flat score and the
bound are not corrected, as TOST is not in the fixed design (each claim is a test at α).

A comparison stops at the first look where damage is decided ("visible damage"), or where
a flat score is decided together with amplification of all failed calls or of any channel
("flat score, amplified failures") or with the bound ("no damage detected"). It does not
stop on either before the design's last look (its maximum, whether or not
the data have reached it yet: a live run's newest look is not its last) while some
channel's one-sided p is below α/2 uncorrected (`channel_hold`: a channel that leans
towards amplified): it reads on until that channel is decided or its evidence fades, so a
comparison stopped as amplified names every channel its evidence reaches, and one that
stops clean has none leaning.
Otherwise it runs to its maximum, where the last look spends what the spending function has
left and reads as the fixed design does: a flat score with no amplification decided is "no
damage detected" (the bound is what lets a comparison stop *early* on it), anything else
undecided "inconclusive". A flat score alone never stops a comparison.

Everything is vectorised over leading axes (studies × comparisons): the simulation test
decides thousands of studies at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import Field
from scipy.stats import norm

from flatscore import defaults
from flatscore.analysis.outputs import AnalysisModel
from flatscore.analysis.paired_score import paired_one_sided
from flatscore.analysis.rate_ratio import bound_p, ratio_p
from flatscore.analysis.sequential_channels import ChannelCounts, channel_z
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
TESTS = ("damage", "flat", "amplified", "bounded")


class SequentialDesign(AnalysisModel):
    """What a sequential study plans: looks, margins, levels and the spending function."""

    look_every: int = Field(defaults.SEQUENTIAL_LOOK_EVERY, ge=1)
    first_look: int | None = Field(None, ge=1)
    """Paired tasks at the first look (None: the first multiple of `look_every` at or above
    `first_look_share` of the maximum); later looks every `look_every`, and the maximum."""
    first_look_share: float = Field(defaults.SEQUENTIAL_FIRST_LOOK, ge=0, lt=1)
    margin: float = Field(defaults.TOST_MARGIN, gt=0, lt=1)
    ratio_margin: float = Field(defaults.SEQUENTIAL_RATIO_MARGIN, gt=1)
    difference_margin: float = Field(defaults.SEQUENTIAL_DIFFERENCE_MARGIN, ge=0, lt=1)
    """Extra failed calls per agent call below which failures count as bounded (beside
    `ratio_margin`: either scale clears)."""
    alpha: float = Field(defaults.ALPHA, gt=0, lt=1)
    gamma_damage: float = defaults.SEQUENTIAL_GAMMA_DAMAGE
    """Hwang–Shih–DeCani parameter of the damage and amplification tests' spending."""
    gamma_equivalence: float = defaults.SEQUENTIAL_GAMMA_EQUIVALENCE
    """… and of the flat-score and bound tests'."""
    channel_hold: float | None = Field(None, gt=0, lt=1)
    """A channel whose one-sided p is below this holds a comparison back from stopping on
    "no damage detected" before its last look (None: α/2, the fixed design's uncorrected
    level for an increase)."""

    def looks(self, tasks: int) -> list[int]:
        """Paired tasks read at each look of a comparison with `tasks` at its maximum."""
        every = self.look_every
        first = self.first_look or max(
            every, math.ceil(self.first_look_share * tasks / every) * every
        )
        return look_counts(tasks, every, first)

    def gamma(self, test: str) -> float:
        harm = ("damage", "amplified", "channel")
        return self.gamma_damage if test in harm else self.gamma_equivalence

    def levels(self) -> dict[str, float]:
        """Each test's one-sided level before multiplicity correction."""
        a = self.alpha
        return {
            "damage": a / 2,
            "flat": a,
            "amplified": a / 2,
            "bounded": a,
            "channel": a / 2,
        }


def look_counts(tasks: int, every: int, first: int | None = None) -> list[int]:
    """Paired tasks read at each look: at `first` (default `every`), then every `every`
    tasks, and the maximum."""
    if tasks < 1:
        return []
    return [*range(first or every, tasks, every), tasks]


def boundaries(tasks: int, design: SequentialDesign, test: str, level: float) -> np.ndarray:
    """Z-scale boundaries of `test` at the looks of a comparison with `tasks` paired tasks."""
    fractions = tuple(n / tasks for n in design.looks(tasks))
    return hsd_boundaries(fractions, level, design.gamma(test))


@dataclass(frozen=True)
class LookStats:
    """One-sided Z statistics (Φ⁻¹ of 1 − p; −inf where a test does not exist) per test, each
    (..., looks)."""

    z: dict[str, np.ndarray]
    counts: list[int]
    maximum: int
    """Paired tasks at the design's maximum (the last look's count when the data reach it)."""
    channels: np.ndarray | None = None
    """Per-channel amplification Z, (..., channels, looks); None: no channel tested."""
    channel_names: tuple[str, ...] = ()

    def channel_count(self) -> int:
        return 0 if self.channels is None else int(self.channels.shape[-2])


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
    channels: ChannelCounts | None = None,
) -> LookStats:
    """The statistics at every look of tasks read in order (last axis: tasks, in reading
    order). `differences` are per-task success differences ref − arm at the default budget;
    the others per-task mean failed agent calls and agent tool calls. `maximum`: the
    design's maximum when the data stop short of it (a run still going): only the planned
    looks the data reach are taken. `channels`: the channels to test for amplification
    (`sequential_channels`), in the same task order."""
    d = np.asarray(differences, dtype=np.float64)
    rates = (failed_arm, calls_arm, failed_ref, calls_ref)
    parts = [np.asarray(a, dtype=np.float64) for a in rates]
    n_max = max(maximum or 0, d.shape[-1])
    counts = [c for c in design.looks(n_max) if c <= d.shape[-1]]
    out: dict[str, list[np.ndarray]] = {name: [] for name in TESTS}
    for n in counts:
        head = d[..., :n]
        out["damage"].append(_z(paired_one_sided(head, 0.0, upper=True)))
        out["flat"].append(_z(paired_one_sided(head, design.margin, upper=False)))
        fa, ca, fr, cr = (a[..., :n] for a in parts)
        has_ratio = (fa.sum(axis=-1) > 0) & (fr.sum(axis=-1) > 0)
        amp = ratio_p(fa, ca, fr, cr)
        out["amplified"].append(_z(np.where(has_ratio, amp, np.nan)))
        bound = bound_p(fa, ca, fr, cr, design.ratio_margin, design.difference_margin)
        out["bounded"].append(_z(bound))
    lead = d.shape[:-1]
    z = {k: np.stack(v, axis=-1) if v else np.zeros((*lead, 0)) for k, v in out.items()}
    if channels is None or not channels.names:
        return LookStats(z=z, counts=counts, maximum=n_max)
    return LookStats(
        z=z,
        counts=counts,
        maximum=n_max,
        channels=channel_z(channels, counts),
        channel_names=channels.names,
    )


@dataclass(frozen=True)
class Decisions:
    """Per study and comparison (leading axes): the verdict code (`VERDICTS`), whether it was
    decided before the maximum ran out, and the look index at which reading stopped.
    `channels`: per tested channel of the family (`channel_owner` says whose), whether it was
    decided amplified; `channel_amplified` per comparison: any of them."""

    verdict: np.ndarray
    decided: np.ndarray
    look: np.ndarray
    damage: np.ndarray
    flat: np.ndarray
    """A drop beyond the margin ruled out (the fixed design's flat score)."""
    amplified: np.ndarray
    bounded: np.ndarray
    channel_amplified: np.ndarray
    channels: np.ndarray
    channel_owner: np.ndarray

    def tasks(self, counts: list[list[int]]) -> np.ndarray:
        """Paired tasks read at the stop, given each comparison's look counts."""
        width = max(1, *map(len, counts))
        table = np.array([(c or [0]) + [(c or [0])[-1]] * (width - len(c or [0])) for c in counts])
        return np.take_along_axis(
            np.broadcast_to(table, (*self.look.shape, table.shape[-1])),
            self.look[..., None],
            axis=-1,
        )[..., 0]


class _Family:
    """One Holm family tested in group-sequential form: hypotheses (..., H) owned by
    comparisons (`owner`), each with its owner's boundaries at the family's level divided by
    the hypotheses still open (computed when first needed: a family of a hundred channels
    needs only the few levels its rejections reach)."""

    def __init__(self, stats: list[LookStats], design: SequentialDesign, test: str) -> None:
        self.stats, self.design, self.test = stats, design, test
        self.level = design.levels()[test]
        self.looks = max(1, *(len(s.counts) for s in stats))
        self._tables: dict[int, np.ndarray] = {}

    def table(self, open_h: int) -> np.ndarray:
        """(comparisons, looks) boundaries at level / open_h; +inf after a comparison's end."""
        h = max(open_h, 1)
        if h not in self._tables:
            rows = []
            for s in self.stats:
                b = boundaries(s.maximum, self.design, self.test, self.level / h)[: len(s.counts)]
                rows.append(np.concatenate([b, np.full(self.looks - b.size, np.inf)]))
            self._tables[h] = np.array(rows)
        return self._tables[h]

    def look(
        self, z: np.ndarray, owner: np.ndarray, active: np.ndarray, rejected: np.ndarray, k: int
    ) -> None:
        """Holm's steps at look k on statistics z (..., H), updating `rejected` in place."""
        size = z.shape[-1]
        for _ in range(size):
            open_h = size - rejected.sum(axis=-1, keepdims=True)
            c = np.full(z.shape, np.inf)
            for h in np.unique(open_h):
                c = np.where(open_h == h, self.table(int(h))[owner, k], c)
            new = active & ~rejected & (z >= c)
            if not new.any():
                return
            rejected |= new


def decide(stats: list[LookStats], design: SequentialDesign) -> Decisions:
    """Run the sequential procedure over comparisons (one `LookStats` each; their leading
    axes are the studies and must agree). Holm across the comparisons for damage and
    amplification, and across all comparisons' channels for the channels (see the module
    docstring)."""
    m = len(stats)
    if m == 0:
        raise ValueError("no comparison to decide")
    lengths = [len(s.counts) for s in stats]
    looks = max(1, *lengths)
    lead = stats[0].z["damage"].shape[:-1]

    def padded(test: str) -> np.ndarray:  # (..., m, looks), −inf after a comparison's end
        cols = []
        for s in stats:
            z = s.z[test]
            pad = np.full((*lead, looks - z.shape[-1]), -np.inf)
            cols.append(np.concatenate([z, pad], axis=-1))
        return np.stack(cols, axis=-2)

    def plain(test: str) -> np.ndarray:  # (m, looks), +inf after the end
        return _Family(stats, design, test).table(1)

    z = {t: padded(t) for t in TESTS}
    # The channel family: every tested channel of every comparison, (..., H, looks).
    owner = np.array([i for i, s in enumerate(stats) for _ in range(s.channel_count())], int)
    ch_z = np.concatenate(
        [
            np.concatenate(
                [s.channels, np.full((*lead, s.channel_count(), looks - len(s.counts)), -np.inf)],
                axis=-1,
            )
            for s in stats
            if s.channels is not None and s.channel_count()
        ]
        or [np.zeros((*lead, 0, looks))],
        axis=-2,
    )
    families = {t: _Family(stats, design, t) for t in ("damage", "amplified", "channel")}
    bounds = {t: plain(t) for t in ("flat", "bounded")}
    shape = (*lead, m)
    kinds = ("damage", "amplified", "flat", "bounded")
    rejected = {t: np.zeros(shape, dtype=bool) for t in kinds}
    ch_rejected = np.zeros((*lead, owner.size), dtype=bool)
    stopped = np.zeros(shape, dtype=bool)
    look = np.zeros(shape, dtype=np.int64)
    verdict = np.zeros(shape, dtype=np.int64)
    last = np.array(lengths) - 1  # the last look the data reach
    final = np.array([len(design.looks(s.maximum)) - 1 for s in stats])  # the design's
    comp = np.arange(m)
    hold = norm.isf(design.channel_hold or design.levels()["channel"])
    for k in range(looks):
        active = ~stopped & (k <= last)
        for test in ("damage", "amplified"):
            families[test].look(z[test][..., k], comp, active, rejected[test], k)
        families["channel"].look(ch_z[..., k], owner, active[..., owner], ch_rejected, k)
        any_channel = np.zeros(shape, dtype=bool)
        leaning = np.zeros(shape, dtype=bool)  # a channel significant at the uncorrected level
        if owner.size:
            lean = ~ch_rejected & (ch_z[..., k] >= hold)
            for i in range(m):
                mine = owner == i
                any_channel[..., i] = ch_rejected[..., mine].any(axis=-1)
                leaning[..., i] = lean[..., mine].any(axis=-1)
        rejected["flat"] |= active & (z["flat"][..., k] >= bounds["flat"][:, k])
        rejected["bounded"] |= active & (z["bounded"][..., k] >= bounds["bounded"][:, k])
        flat = rejected["flat"]
        harm = rejected["amplified"] | any_channel
        at_max = k == final
        clean = (rejected["bounded"] & ~leaning) | (at_max & ~harm)
        named = ~leaning | at_max  # every leaning channel decided, or no look left for it
        code = np.where(
            rejected["damage"],
            1,
            np.where(flat & harm & named, 2, np.where(flat & ~harm & clean, 3, 0)),
        )
        stop = active & ((code > 0) | (k == last))
        verdict = np.where(stop, code, verdict)
        look = np.where(stop, k, look)
        stopped |= stop
    amp_channels = np.zeros(shape, dtype=bool)
    for i in range(m):
        amp_channels[..., i] = ch_rejected[..., owner == i].any(axis=-1)
    return Decisions(
        verdict=verdict,
        decided=verdict > 0,
        look=look,
        damage=rejected["damage"],
        flat=rejected["flat"],
        amplified=rejected["amplified"],
        bounded=rejected["bounded"],
        channel_amplified=amp_channels,
        channels=ch_rejected,
        channel_owner=owner,
    )
