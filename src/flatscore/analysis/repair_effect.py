"""Repair as a study factor: the effect of reflective repair per cell and arm, and the
precision × repair interaction, with paired task-bootstrap CIs.

- An episode **ran with repair** when its metadata says so (`metadata["repair"]["enabled"]`,
  written by `flatscore.agents.repair`), when it holds repair turns, or when its arm label
  ends in `+repair`. Its **base arm** is the label without that suffix, so `int4` and
  `int4+repair` are the same precision with and without repair.
- **Repair effect** at an arm = S_with(K) − S_without(K) (success within error budget K,
  docs/analysis.md "Error budget and S(K)"), paired on tasks; also the change of every channel rate.
- **Interaction** = (repair effect at the arm) − (repair effect at the reference arm): how
  much more repair helps the quantized arm than the reference.
- Everything is task-weighted, from the shared task matrix (`flatscore.analysis.task_matrix`),
  on the tasks every group of the cell ran. Success effects and the interaction get the
  paired success-difference interval (`flatscore.analysis.paired_score`) at every size;
  channel-rate effects a task bootstrap (one resample matrix per cell) when the cell has
  enough tasks.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

import numpy as np
from pydantic import Field

from flatscore.analysis.budget import budgets_with, default_budget
from flatscore.analysis.channels import CHANNELS, LEAF_CHANNELS, load_rules
from flatscore.analysis.facts import EpisodeFacts, episode_facts
from flatscore.analysis.notices import Notice
from flatscore.analysis.outputs import AnalysisModel, CountMode, Interval
from flatscore.analysis.paired_score import paired_difference_interval, paired_test
from flatscore.analysis.precision import ReferenceUndecided, choose_reference, precision_order
from flatscore.analysis.settings import AnalysisSettings
from flatscore.analysis.stats import percentile_ci, ratio, resample_counts, stable_rng
from flatscore.analysis.task_matrix import MALFORMED, TaskMatrix, task_matrix
from flatscore.episode import Episode

REPAIR_SUFFIX = "+repair"

DEFINITIONS = {
    "repair_effect": "S_with_repair(K) − S_without_repair(K) of the same arm, paired on tasks "
    "(positive: repair helps)",
    "interaction": "(repair effect at the arm) − (repair effect at the reference arm), paired "
    "on tasks (positive: repair helps the arm more than the reference)",
    "channel_rate_effect": "channel rate with repair − without (rate = failed agent calls in "
    "the channel / agent tool calls)",
    "ci": "success effects and the interaction: 95% paired interval (t, or Tango's score) on "
    "per-task differences; channel-rate effects: 95% percentile interval of a task-level cluster "
    "bootstrap (one resample matrix per cell), only with enough paired tasks",
    "test": "paired test (t, or McNemar's score) on per-task success at the default K, with vs "
    "without repair",
}


class EffectPoint(AnalysisModel):
    K: int
    success_without: float
    success_with: float
    effect: float
    ci_low: float | None
    ci_high: float | None


class RepairArmEffect(AnalysisModel):
    arm: str
    paired_tasks: int
    episodes_without: int
    episodes_with: int
    repair_instructions: int
    episodes_repaired: int
    repair_config: dict[str, Any] | None
    effect: Interval
    effect_by_K: list[EffectPoint]
    channel_rate_effect: dict[str, Interval]
    test: str
    p_value: float
    interaction: Interval | None = None


class RepairCell(AnalysisModel):
    model: str
    domain: str
    reference: str
    arms: list[RepairArmEffect]
    warnings: list[str] = Field(default_factory=list)
    notices: list[Notice] = Field(default_factory=list, exclude=True)
    """The cell's warnings as data: the report words them into `warnings`
    (`flatscore.report.warning_text.worded_repair`) and empties this list."""


class RepairEffectResult(AnalysisModel):
    default_K: int
    budgets: list[int]
    count: CountMode
    bootstrap: int
    seed: int
    confidence: float
    definitions: dict[str, str] = Field(default_factory=lambda: dict(DEFINITIONS))
    cells: list[RepairCell]
    warnings: list[str] = Field(default_factory=list)
    notices: list[Notice] = Field(default_factory=list, exclude=True)
    """The result's warnings as data (repair runs without a plain twin), worded as the
    cells' are."""


def is_repaired(episode: Episode) -> bool:
    """Whether an episode ran with the repair middleware."""
    meta = episode.metadata.get("repair")
    if isinstance(meta, dict) and meta.get("enabled"):
        return True
    return episode.arm.endswith(REPAIR_SUFFIX) or any(m.repair for m in episode.messages)


def base_arm(arm: str) -> str:
    return arm[: -len(REPAIR_SUFFIX)] if arm.endswith(REPAIR_SUFFIX) else arm


def has_repair_runs(episodes: Iterable[Episode]) -> bool:
    return any(is_repaired(e) for e in episodes)


def _score(d: np.ndarray, confidence: float) -> Interval:
    """Mean per-task difference d ∈ [−1, 1] with its paired interval."""
    lo, hi = paired_difference_interval(d, confidence)
    return Interval(value=float(d.mean()), ci_low=lo, ci_high=hi)


def _channel_rate(
    m: TaskMatrix, ch: str, weights: np.ndarray | None
) -> tuple[float, np.ndarray | None]:
    den = "attempts" if ch == MALFORMED else "calls"
    total = m.total(den)
    point = m.total(ch) / total if total else float("nan")
    if weights is None:
        return point, None
    return point, ratio(weights @ m.column(ch), weights @ m.column(den))


def repair_effects(
    episodes: Iterable[Episode], options: AnalysisSettings | None = None
) -> RepairEffectResult:
    """Repair effect per (model, domain) cell and base arm, and the interaction with precision."""
    options = options or AnalysisSettings()
    rules = options.rules or load_rules()
    groups: dict[tuple[str, str], dict[tuple[str, bool], list[EpisodeFacts]]] = defaultdict(
        lambda: defaultdict(list)
    )
    meta: dict[tuple[str, str, str], dict[str, Any]] = {}
    instructions: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for ep in episodes:
        if ep.is_infrastructure_error:
            continue
        repaired, arm = is_repaired(ep), base_arm(ep.arm)
        groups[(ep.model, ep.domain)][(arm, repaired)].append(episode_facts(ep, rules))
        if repaired:
            key = (ep.model, ep.domain, arm)
            info = ep.metadata.get("repair")
            if isinstance(info, dict):
                meta.setdefault(
                    key, {k: v for k, v in info.items() if k in ("channels", "attempts")}
                )
            instructions[key].append(sum(m.repair for m in ep.messages))
    facts = [f for arms in groups.values() for fl in arms.values() for f in fl]
    default_k, _ = default_budget(facts, options.count)
    budgets = budgets_with(options.budgets, default_k)

    cells: list[RepairCell] = []
    notices: list[Notice] = []  # the warnings as data, worded by the report
    for model, domain in sorted(groups):
        cell = groups[(model, domain)]
        arms = precision_order({a for a, r in cell if (a, not r) in cell and r})
        if not arms:
            if any(r for _, r in cell):
                notices.append(Notice(kind="repair_unmatched", model=model, domain=domain))
            continue
        named = options.reference if options.reference in arms else None
        try:
            reference, _ = choose_reference(arms, named)
        except ReferenceUndecided:  # analyze has already asked for --reference
            reference = arms[0]
        cell_notices: list[Notice] = []
        task_sets = [{f.task_id for f in cell[(a, r)]} for a in arms for r in (False, True)]
        common = sorted(set.intersection(*task_sets))
        if len(common) < len(set().union(*task_sets)):
            left = len(set().union(*task_sets)) - len(common)
            cell_notices.append(Notice(kind="repair_tasks_left_out", count=left))
        if not common:
            cell_notices.append(Notice(kind="repair_no_common_task"))
            cells.append(
                RepairCell(
                    model=model, domain=domain, reference=reference, arms=[], notices=cell_notices
                )
            )
            continue
        weights = (
            resample_counts(
                len(common), options.bootstrap, stable_rng(options.seed, model, domain, "repair")
            )
            if len(common) >= options.bootstrap_min_tasks
            else None
        )
        if weights is None:
            cell_notices.append(
                Notice(
                    kind="repair_few_tasks", count=len(common), minimum=options.bootstrap_min_tasks
                )
            )
        mats = {
            (a, r): task_matrix(cell[(a, r)], common, budgets, options.count)
            for a in arms
            for r in (False, True)
        }

        def effect_d(a: str, k: int, mats: dict[tuple[str, bool], TaskMatrix] = mats) -> np.ndarray:
            return mats[(a, True)].column(f"S{k}") - mats[(a, False)].column(f"S{k}")

        results = []
        for a in arms:
            by_k = []
            for k in budgets:
                iv = _score(effect_d(a, k), options.confidence)
                by_k.append(
                    EffectPoint(
                        K=k,
                        success_without=float(mats[(a, False)].column(f"S{k}").mean()),
                        success_with=float(mats[(a, True)].column(f"S{k}").mean()),
                        effect=float(iv.value or 0.0),
                        ci_low=iv.ci_low,
                        ci_high=iv.ci_high,
                    )
                )
            channels = {}
            for ch in CHANNELS:
                r1, b1 = _channel_rate(mats[(a, True)], ch, weights)
                r0, b0 = _channel_rate(mats[(a, False)], ch, weights)
                if not np.isfinite(r1 - r0):
                    channels[ch] = Interval(
                        value=None, note="undefined on these episodes (no agent tool calls)"
                    )
                    continue
                lo = hi = None
                if b1 is not None and b0 is not None:
                    lo, hi = percentile_ci(b1 - b0, options.confidence)
                channels[ch] = Interval(value=float(r1 - r0), ci_low=lo, ci_high=hi)
            interaction = None
            if a != reference:
                half = (effect_d(a, default_k) - effect_d(reference, default_k)) / 2.0
                iv = _score(half, options.confidence)
                interaction = Interval(
                    value=2 * float(iv.value or 0.0),
                    ci_low=None if iv.ci_low is None else 2 * iv.ci_low,
                    ci_high=None if iv.ci_high is None else 2 * iv.ci_high,
                )
            counts = instructions.get((model, domain, a), [])
            results.append(
                RepairArmEffect(
                    arm=a,
                    paired_tasks=len(common),
                    episodes_without=len(cell[(a, False)]),
                    episodes_with=len(cell[(a, True)]),
                    repair_instructions=sum(counts),
                    episodes_repaired=sum(1 for c in counts if c > 0),
                    repair_config=meta.get((model, domain, a)),
                    effect=_score(effect_d(a, default_k), options.confidence),
                    effect_by_K=by_k,
                    channel_rate_effect=channels,
                    test="paired test (t, or McNemar's score) on per-task success",
                    p_value=float(paired_test(effect_d(a, default_k))),
                    interaction=interaction,
                )
            )
        cells.append(
            RepairCell(
                model=model,
                domain=domain,
                reference=reference,
                arms=results,
                notices=cell_notices,
            )
        )
    return RepairEffectResult(
        default_K=default_k,
        budgets=budgets,
        **options.model_dump(include={"count", "bootstrap", "seed", "confidence"}),
        cells=cells,
        notices=notices,
    )


__all__ = [
    "DEFINITIONS",
    "LEAF_CHANNELS",
    "RepairArmEffect",
    "RepairCell",
    "RepairEffectResult",
    "base_arm",
    "has_repair_runs",
    "is_repaired",
    "repair_effects",
]
