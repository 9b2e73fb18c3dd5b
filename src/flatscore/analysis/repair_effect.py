"""Repair as a study factor: the effect of reflective repair per cell and arm, and the
precision × repair interaction, with paired task-bootstrap CIs.

- An episode **ran with repair** when its metadata says so (`metadata["repair"]["enabled"]`,
  written by `flatscore.agents.repair`), when it holds repair turns, or when its arm label
  ends in `+repair`. Its **base arm** is the label without that suffix, so `int4` and
  `int4+repair` are the same precision with and without repair.
- **Repair effect** at an arm = S_with(K) − S_without(K) (success within error budget K,
  DESIGN "Error budget K"), paired on tasks; also the change of every channel rate.
- **Interaction** = (repair effect at the arm) − (repair effect at the reference arm): how
  much more repair helps the quantized arm than the reference.
- CIs: the task-level cluster bootstrap of `flatscore.analysis.stats`, one resample matrix per
  cell over the tasks every group of the cell ran, shared by every number of the cell.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from pydantic import ConfigDict, Field

from flatscore.analysis.budget import FALLBACK_DEFAULT_K, success_within_budgets
from flatscore.analysis.channels import CHANNELS, LEAF_CHANNELS, ChannelRules, load_rules
from flatscore.analysis.facts import EpisodeFacts, episode_facts
from flatscore.analysis.interval import AnalysisModel, CountMode, Interval
from flatscore.analysis.precision import choose_reference, precision_order
from flatscore.analysis.stats import (
    paired_success_test,
    percentile_ci,
    ratio,
    resample_counts,
    stable_rng,
)
from flatscore.episode import Episode

REPAIR_SUFFIX = "+repair"

DEFINITIONS = {
    "repair_effect": "S_with_repair(K) − S_without_repair(K) of the same arm, paired on tasks "
    "(positive: repair helps)",
    "interaction": "(repair effect at the arm) − (repair effect at the reference arm), paired "
    "on tasks (positive: repair helps the arm more than the reference)",
    "channel_rate_effect": "channel rate with repair − without (rate = failed agent calls in "
    "the channel / agent tool calls)",
    "ci": "95% percentile interval of a task-level cluster bootstrap, one resample matrix per "
    "cell shared by every group of the cell",
    "test": "exact McNemar (one trial per task) or Wilcoxon signed-rank on per-task success "
    "at the default K, with vs without repair",
}


class RepairOptions(AnalysisModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    reference: str | None = None
    budgets: list[int] | None = None
    count: CountMode = "all"
    bootstrap: int = Field(5000, ge=100)
    seed: int = 0
    confidence: float = 0.95
    rules: ChannelRules | None = None


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


def _task_matrix(
    facts: Sequence[EpisodeFacts], tasks: Sequence[str], budgets: Sequence[int], count: str
) -> np.ndarray:
    """(tasks × [n, S(K)…, calls, channels…]) sums."""
    index = {t: i for i, t in enumerate(tasks)}
    kept = [f for f in facts if f.task_id in index]
    cols = 2 + len(budgets) + len(CHANNELS)
    per_ep = np.zeros((len(kept), cols))
    per_ep[:, 0] = 1.0
    succeeded = np.array([f.succeeded for f in kept], dtype=bool)
    failures = np.array([f.failed_calls(count) for f in kept], dtype=np.int64)
    per_ep[:, 1 : 1 + len(budgets)] = success_within_budgets(succeeded, failures, budgets)
    base = 1 + len(budgets)
    for i, f in enumerate(kept):
        per_ep[i, base] = f.agent_calls
        for j, ch in enumerate(CHANNELS):
            value = (
                f.channels["role_confusion"] + f.channels["invented"]
                if ch == "unknown_tool"
                else f.channels[ch]
            )
            per_ep[i, base + 1 + j] = value
    out = np.zeros((len(tasks), cols))
    np.add.at(out, np.array([index[f.task_id] for f in kept], dtype=np.int64), per_ep)
    return out


def _rates(values: np.ndarray, n_budgets: int) -> np.ndarray:
    """[S(K)…, channel rates…] from (… × columns) sums."""
    s = ratio(values[..., 1 : 1 + n_budgets], values[..., :1])
    calls = values[..., 1 + n_budgets : 2 + n_budgets]
    ch = ratio(values[..., 2 + n_budgets :], calls)
    return np.concatenate([s, ch], axis=-1)


def _interval(point: float, boot: np.ndarray, confidence: float) -> Interval:
    if not np.isfinite(point):
        return Interval(value=None, note="undefined on these episodes (no agent tool calls)")
    lo, hi = percentile_ci(boot, confidence)
    return Interval(value=float(point), ci_low=lo, ci_high=hi)


def repair_effects(
    episodes: Iterable[Episode], options: RepairOptions | None = None
) -> RepairEffectResult:
    """Repair effect per (model, domain) cell and base arm, and the interaction with precision."""
    options = options or RepairOptions()
    rules = options.rules or load_rules()
    groups: dict[tuple[str, str], dict[tuple[str, bool], list[EpisodeFacts]]] = defaultdict(
        lambda: defaultdict(list)
    )
    meta: dict[tuple[str, str, str], dict[str, Any]] = {}
    instructions: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    max_errors: list[int] = []
    for ep in episodes:
        if ep.is_infrastructure_error:
            continue
        repaired, arm = is_repaired(ep), base_arm(ep.arm)
        groups[(ep.model, ep.domain)][(arm, repaired)].append(episode_facts(ep, rules))
        if ep.error_budget.max_errors is not None:
            max_errors.append(ep.error_budget.max_errors)
        if repaired:
            key = (ep.model, ep.domain, arm)
            info = ep.metadata.get("repair")
            if isinstance(info, dict):
                meta.setdefault(
                    key, {k: v for k, v in info.items() if k in ("channels", "attempts")}
                )
            instructions[key].append(sum(m.repair for m in ep.messages))
    default_k = min(max_errors) - 1 if max_errors else FALLBACK_DEFAULT_K
    budgets = sorted(set(options.budgets or range(default_k + 1)) | {default_k})
    nb = len(budgets)
    kd = budgets.index(default_k)

    cells: list[RepairCell] = []
    warnings: list[str] = []
    for model, domain in sorted(groups):
        cell = groups[(model, domain)]
        arms = precision_order({a for a, r in cell if (a, not r) in cell and r})
        if not arms:
            if any(r for _, r in cell):
                warnings.append(f"{model}/{domain}: repair runs without a matching plain run")
            continue
        named = options.reference if options.reference in arms else None
        reference, _ = choose_reference(arms, named)
        cell_warnings: list[str] = []
        task_sets = [{f.task_id for f in cell[(a, r)]} for a in arms for r in (False, True)]
        common = sorted(set.intersection(*task_sets))
        if len(common) < len(set().union(*task_sets)):
            cell_warnings.append(
                f"{len(set().union(*task_sets)) - len(common)} task(s) not run by every arm with "
                "and without repair are left out"
            )
        if not common:
            cell_warnings.append("no task was run by every group: no comparison")
            cells.append(
                RepairCell(
                    model=model, domain=domain, reference=reference, arms=[], warnings=cell_warnings
                )
            )
            continue
        weights = resample_counts(
            len(common), options.bootstrap, stable_rng(options.seed, model, domain, "repair")
        )
        sums = {
            (a, r): _task_matrix(cell[(a, r)], common, budgets, options.count)
            for a in arms
            for r in (False, True)
        }
        point = {g: _rates(v.sum(axis=0), nb) for g, v in sums.items()}
        boot = {g: _rates(weights @ v, nb) for g, v in sums.items()}
        effect = {a: point[(a, True)] - point[(a, False)] for a in arms}
        boot_effect = {a: boot[(a, True)] - boot[(a, False)] for a in arms}

        results = []
        for a in arms:
            n0, n1 = sums[(a, False)][:, 0], sums[(a, True)][:, 0]
            without_task = sums[(a, False)][:, 1 + kd] / n0
            with_task = sums[(a, True)][:, 1 + kd] / n1
            single = bool(np.all(n0 == 1) and np.all(n1 == 1))
            p, test = paired_success_test(without_task, with_task, single)
            by_k = []
            for j, k in enumerate(budgets):
                lo, hi = percentile_ci(boot_effect[a][:, j], options.confidence)
                by_k.append(
                    EffectPoint(
                        K=k,
                        success_without=float(point[(a, False)][j]),
                        success_with=float(point[(a, True)][j]),
                        effect=float(effect[a][j]),
                        ci_low=lo,
                        ci_high=hi,
                    )
                )
            channels = {
                ch: _interval(
                    float(effect[a][nb + j]), boot_effect[a][:, nb + j], options.confidence
                )
                for j, ch in enumerate(CHANNELS)
            }
            interaction = None
            if a != reference:
                interaction = _interval(
                    float(effect[a][kd] - effect[reference][kd]),
                    boot_effect[a][:, kd] - boot_effect[reference][:, kd],
                    options.confidence,
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
                    effect=_interval(
                        float(effect[a][kd]), boot_effect[a][:, kd], options.confidence
                    ),
                    effect_by_K=by_k,
                    channel_rate_effect=channels,
                    test=test,
                    p_value=p,
                    interaction=interaction,
                )
            )
        cells.append(
            RepairCell(
                model=model,
                domain=domain,
                reference=reference,
                arms=results,
                warnings=cell_warnings,
            )
        )
    return RepairEffectResult(
        default_K=default_k,
        budgets=budgets,
        count=options.count,
        bootstrap=options.bootstrap,
        seed=options.seed,
        confidence=options.confidence,
        cells=cells,
        warnings=warnings,
    )


def markdown_table(result: RepairEffectResult) -> str:
    """One row per cell and arm: success without / with repair at the default K, the effect
    and the interaction (points, with CIs)."""

    def pts(iv: Interval | None) -> str:
        if iv is None or iv.value is None:
            return "—"
        ci = (
            f" [{100 * iv.ci_low:+.1f}, {100 * iv.ci_high:+.1f}]"
            if iv.ci_low is not None and iv.ci_high is not None
            else ""
        )
        return f"{100 * iv.value:+.1f}{ci}"

    k = result.default_K
    lines = [
        f"| model | domain | arm | tasks | S({k}) without | S({k}) with | repair effect | "
        "interaction vs ref | repair turns |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for cell in result.cells:
        for a in cell.arms:
            pk = next(p for p in a.effect_by_K if k == p.K)
            ref = " (ref)" if a.arm == cell.reference else ""
            without, with_ = 100 * pk.success_without, 100 * pk.success_with
            lines.append(
                f"| {cell.model} | {cell.domain} | {a.arm}{ref} | {a.paired_tasks} "
                f"| {without:.1f} | {with_:.1f} | {pts(a.effect)} | {pts(a.interaction)} "
                f"| {a.repair_instructions} |"
            )
    return "\n".join(lines)


__all__ = [
    "DEFINITIONS",
    "LEAF_CHANNELS",
    "RepairArmEffect",
    "RepairCell",
    "RepairEffectResult",
    "RepairOptions",
    "base_arm",
    "has_repair_runs",
    "is_repaired",
    "markdown_table",
    "repair_effects",
]
