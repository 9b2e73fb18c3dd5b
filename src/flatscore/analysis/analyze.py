"""Episodes → AnalysisResult: group into cells and arms, measure each arm, compare each arm
with its cell's reference under one paired task bootstrap, then correct across the study.

Cells are (model, domain) pairs; arms are the precisions within a cell. Comparisons are
paired on the tasks every arm of the cell ran (a warning names any task left out).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

import flatscore
from flatscore.analysis.budget import (
    FALLBACK_DEFAULT_K,
    budget_curve,
    budget_curve_intervals,
    recorded_max_errors,
    success_within_budgets,
)
from flatscore.analysis.channels import LEAF_CHANNELS, ChannelRules, load_rules
from flatscore.analysis.definitions import definitions
from flatscore.analysis.facts import EpisodeFacts, episode_facts
from flatscore.analysis.invariance import novel_fraction, rowwise_spearman, spearman_rho
from flatscore.analysis.passk import pass_hat_k
from flatscore.analysis.precision import choose_reference, precision_order
from flatscore.analysis.recovery import call_recovery_rate, episode_recovery_rate
from flatscore.analysis.repair_effect import RepairOptions, has_repair_runs, repair_effects
from flatscore.analysis.result import (
    CHANNELS,
    AnalysisResult,
    ArmStats,
    BudgetPoint,
    Cell,
    ChannelAmplification,
    ChannelStat,
    Comparison,
    Correction,
    CountMode,
    GapAmplification,
    GapPoint,
    Interval,
    Settings,
    Verdict,
)
from flatscore.analysis.risk import DEFAULT_RISK_THRESHOLD, risk_screen
from flatscore.analysis.stats import (
    adjust_pvalues,
    paired_success_test,
    percentile_ci,
    ratio,
    resample_counts,
    stable_rng,
    tost_paired,
)
from flatscore.analysis.trajectory import TRAJECTORY_METRICS, trajectory_stats
from flatscore.episode import Episode
from flatscore.errors import InputError

VERDICT_ORDER: tuple[Verdict, ...] = (
    "visible damage",
    "flat score, amplified failures",
    "inconclusive",
    "no damage detected",
)


class AnalysisOptions(BaseModel):
    """Settings of one analysis; the CLI flags map onto these one to one."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    reference: str | None = None
    budgets: list[int] | None = None
    count: CountMode = "all"
    tost_margin: float = Field(0.075, gt=0, lt=1, description="fraction, 0.075 = 7.5 points")
    bootstrap: int = Field(5000, ge=100)
    seed: int = 0
    correction: Correction = "holm"
    confidence: float = 0.95
    alpha: float = 0.05
    risk_threshold: float = DEFAULT_RISK_THRESHOLD
    rules: ChannelRules | None = None


# ---------------------------------------------------------------- per-arm numbers


MALFORMED = "malformed_output"
"""Not a tool call: its rate is per attempted call (agent tool calls + malformed outputs), so
it stays in [0, 1]."""


def _share(num: float, den: float) -> float | None:
    return float(num) / float(den) if den else None


def arm_stats(
    arm: str,
    facts: Sequence[EpisodeFacts],
    infrastructure: int,
    budgets: Sequence[int],
    count: str,
    intervals: Sequence[tuple[float | None, float | None]] | None = None,
) -> ArmStats:
    """Everything measured on one arm (`facts` already without infrastructure errors);
    `intervals` are the S(K) bootstrap intervals, one per budget."""
    n = len(facts)
    per_task: dict[str, list[bool]] = defaultdict(list)
    for f in facts:
        per_task[f.task_id].append(f.succeeded)
    tasks = sorted(per_task)
    trials = [len(per_task[t]) for t in tasks]
    calls = sum(f.agent_calls for f in facts)
    leaf = {ch: sum(f.channels[ch] for f in facts) for ch in LEAF_CHANNELS}
    counts = {**leaf, "unknown_tool": leaf["role_confusion"] + leaf["invented"]}
    recorded = recorded_max_errors(facts)
    curve = budget_curve(facts, budgets, count)
    hallucinated: Counter[str] = Counter()
    for f in facts:
        hallucinated.update(f.hallucinated)
    return ArmStats(
        arm=arm,
        episodes=n,
        infrastructure_errors=infrastructure,
        tasks=len(tasks),
        trials_min=min(trials, default=0),
        trials_max=max(trials, default=0),
        success_rate=_share(sum(f.succeeded for f in facts), n),
        average_reward=_share(sum(f.reward or 0.0 for f in facts), n),
        pass_k=pass_hat_k([sum(per_task[t]) for t in tasks], trials),
        agent_tool_calls=calls,
        failed_agent_calls=sum(f.agent_failed for f in facts),
        unanswered_agent_calls=sum(f.unanswered for f in facts),
        channels={
            ch: ChannelStat(
                count=counts[ch],
                rate=_share(
                    counts[ch], calls + counts["malformed_output"] if ch == MALFORMED else calls
                ),
            )
            for ch in CHANNELS
        },
        user_tool_calls=sum(f.user_calls for f in facts),
        user_failed_calls=sum(f.user_failed for f in facts),
        malformed_outputs=leaf["malformed_output"],
        budget_curve=[
            BudgetPoint(
                K=k,
                success_rate=s,
                ci_low=ci[0],
                ci_high=ci[1],
                recomputable=recorded is None or k < recorded,
            )
            for k, s, ci in zip(
                budgets, curve, intervals or [(None, None)] * len(budgets), strict=True
            )
        ],
        max_failed_calls=max((f.failed_calls(count) for f in facts), default=0),
        recorded_max_errors=recorded,
        recovery_rate=call_recovery_rate(facts),
        recovered_calls=sum(f.recovered for f in facts),
        failed_calls_with_next_call=sum(f.failed_with_next for f in facts),
        episodes_with_failure=sum(1 for f in facts if f.agent_failed > 0),
        episode_recovery_rate=episode_recovery_rate(facts),
        termination_reasons=dict(sorted(Counter(f.termination for f in facts).items())),
        trajectory=trajectory_stats(facts),
        hallucinated_names=dict(sorted(hallucinated.items())),
        tool_list_sources=dict(sorted(Counter(f.tool_list_source for f in facts).items())),
    )


# ---------------------------------------------------------------- per-task sums


@dataclass(frozen=True)
class TaskSums:
    """Per-task sums of one arm on the cell's common tasks: `values` is (tasks × columns),
    `names` is (tasks × hallucinated names of the cell)."""

    values: np.ndarray
    names: np.ndarray


def _columns(budgets: Sequence[int]) -> dict[str, int]:
    cols = ["n", *(f"S{k}" for k in budgets), "calls", "attempts", "agent_failed", "recovered"]
    cols += list(CHANNELS) + [f"traj_{m}" for m in TRAJECTORY_METRICS]
    return {c: i for i, c in enumerate(cols)}


def task_sums(
    facts: Sequence[EpisodeFacts],
    tasks: Sequence[str],
    names: Sequence[str],
    budgets: Sequence[int],
    count: str,
    cols: dict[str, int],
) -> TaskSums:
    index = {t: i for i, t in enumerate(tasks)}
    kept = [f for f in facts if f.task_id in index]
    rows = np.array([index[f.task_id] for f in kept], dtype=np.int64)
    per_ep = np.zeros((len(kept), len(cols)))
    per_ep[:, cols["n"]] = 1.0
    succeeded = np.array([f.succeeded for f in kept], dtype=bool)
    failures = np.array([f.failed_calls(count) for f in kept], dtype=np.int64)
    s = success_within_budgets(succeeded, failures, budgets)
    for j, k in enumerate(budgets):
        per_ep[:, cols[f"S{k}"]] = s[:, j]
    for i, f in enumerate(kept):
        per_ep[i, cols["calls"]] = f.agent_calls
        per_ep[i, cols["attempts"]] = f.agent_calls + f.channels[MALFORMED]
        per_ep[i, cols["agent_failed"]] = f.agent_failed
        per_ep[i, cols["recovered"]] = f.recovered
        for ch in LEAF_CHANNELS:
            per_ep[i, cols[ch]] = f.channels[ch]
        per_ep[i, cols["unknown_tool"]] = f.channels["role_confusion"] + f.channels["invented"]
        per_ep[i, cols["traj_agent_turns"]] = f.agent_turns
        per_ep[i, cols["traj_agent_tool_calls"]] = f.agent_calls
        per_ep[i, cols["traj_messages"]] = f.messages
    values = np.zeros((len(tasks), len(cols)))
    np.add.at(values, rows, per_ep)
    name_index = {n: j for j, n in enumerate(names)}
    name_counts = np.zeros((len(tasks), len(names)))
    for r, f in zip(rows, kept, strict=True):
        for name, c in f.hallucinated.items():
            name_counts[r, name_index[name]] += c
    return TaskSums(values=values, names=name_counts)


# ---------------------------------------------------------------- one comparison


@dataclass
class _Draft:
    """A comparison before the study-wide multiple-testing correction."""

    fields: dict[str, Any]
    p_value: float | None
    success_gap: float | None
    amplified: bool
    grows: bool


def _interval(
    point: float | None, boot: np.ndarray, conf: float, note: str | None = None
) -> Interval:
    if point is None or not np.isfinite(point):
        return Interval(value=None, note=note or "undefined on these episodes")
    lo, hi = percentile_ci(boot, conf)
    return Interval(value=float(point), ci_low=lo, ci_high=hi, note=note)


def _finite(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def compare(
    arm: str,
    reference: str,
    ref: TaskSums,
    alt: TaskSums,
    weights: np.ndarray,
    names: Sequence[str],
    budgets: Sequence[int],
    default_k: int,
    cols: dict[str, int],
    options: AnalysisOptions,
) -> _Draft:
    """Every arm-vs-reference number with bootstrap CIs (weights: resamples × tasks)."""
    conf = options.confidence
    R, A = ref.values.sum(axis=0), alt.values.sum(axis=0)
    BR, BA = weights @ ref.values, weights @ alt.values

    def rate(v: np.ndarray, col: str, den: str) -> np.ndarray:
        return ratio(v[..., cols[col]], v[..., cols[den]])

    gaps: list[GapPoint] = []
    boot_gap: dict[int, np.ndarray] = {}
    for k in budgets:
        s_ref, s_arm = float(rate(R, f"S{k}", "n")), float(rate(A, f"S{k}", "n"))
        boot_gap[k] = rate(BR, f"S{k}", "n") - rate(BA, f"S{k}", "n")
        lo, hi = percentile_ci(boot_gap[k], conf)
        gaps.append(
            GapPoint(K=k, gap=s_ref - s_arm, ci_low=lo, ci_high=hi, s_ref=s_ref, s_arm=s_arm)
        )
    g_default = next(g for g in gaps if default_k == g.K)
    k_small = min(budgets)
    g_small = next(g for g in gaps if k_small == g.K)
    assert g_default.gap is not None and g_small.gap is not None
    if g_default.gap == 0:
        amp = GapAmplification(
            k_small=k_small,
            k_default=default_k,
            value=None,
            note="Gap(K_default) is 0: the ratio does not exist (see gap_growth)",
        )
    else:
        amp = GapAmplification(
            k_small=k_small, k_default=default_k, value=g_small.gap / g_default.gap
        )
    growth = _interval(g_small.gap - g_default.gap, boot_gap[k_small] - boot_gap[default_k], conf)

    channel_amp: dict[str, ChannelAmplification] = {}
    for ch in CHANNELS:
        den = "attempts" if ch == MALFORMED else "calls"
        r_ref, r_arm = float(rate(R, ch, den)), float(rate(A, ch, den))
        with np.errstate(divide="ignore", invalid="ignore"):
            boot = rate(BA, ch, den) / rate(BR, ch, den)
        c_ref, c_arm = int(R[cols[ch]]), int(A[cols[ch]])
        point = r_arm / r_ref if np.isfinite(r_ref) and r_ref > 0 and np.isfinite(r_arm) else None
        lo, hi = percentile_ci(boot, conf) if point is not None else (None, None)
        note = None
        if point is None:
            note = (
                f"the reference never failed this way; the arm did {c_arm} time(s)"
                if c_ref == 0 and c_arm > 0
                else "no failures in this channel in either arm"
                if c_ref == 0
                else "no agent tool calls"
            )
        channel_amp[ch] = ChannelAmplification(
            ratio=point,
            ci_low=lo,
            ci_high=hi,
            count_ratio=c_arm / c_ref if c_ref else None,
            count_arm=c_arm,
            count_ref=c_ref,
            rate_arm=_finite(r_arm),
            rate_ref=_finite(r_ref),
            amplified=lo is not None and lo > 1.0,
            note=note,
        )
    amplified = [ch for ch, c in channel_amp.items() if c.amplified]

    ref_names = Counter(
        {n: int(c) for n, c in zip(names, ref.names.sum(axis=0), strict=True) if c > 0}
    )
    arm_names = Counter(
        {n: int(c) for n, c in zip(names, alt.names.sum(axis=0), strict=True) if c > 0}
    )
    union = sorted(set(ref_names) | set(arm_names))
    rho, rho_note = spearman_rho(ref_names, arm_names)
    rho_lo = rho_hi = None
    if rho is not None:
        idx = [names.index(n) for n in union]
        boot_rho = rowwise_spearman(weights @ ref.names[:, idx], weights @ alt.names[:, idx])
        rho_lo, rho_hi = percentile_ci(boot_rho, conf)
    novel, novel_names = novel_fraction(ref_names, arm_names)

    n_ref, n_arm = ref.values[:, cols["n"]], alt.values[:, cols["n"]]
    ref_task = ref.values[:, cols[f"S{default_k}"]] / n_ref
    arm_task = alt.values[:, cols[f"S{default_k}"]] / n_arm
    single = bool(np.all(n_ref == 1) and np.all(n_arm == 1))
    p_value, test = paired_success_test(ref_task, arm_task, single)
    tost_p, equivalent = tost_paired(ref_task, arm_task, options.tost_margin, options.alpha)
    success_diff = _interval(g_default.gap, boot_gap[default_k], conf)

    traj = {
        m: _interval(
            float(rate(A, f"traj_{m}", "n") - rate(R, f"traj_{m}", "n")),
            rate(BA, f"traj_{m}", "n") - rate(BR, f"traj_{m}", "n"),
            conf,
        )
        for m in TRAJECTORY_METRICS
    }
    rec_point = rate(A, "recovered", "agent_failed") - rate(R, "recovered", "agent_failed")
    recovery = _interval(
        _finite(float(rec_point)),
        rate(BA, "recovered", "agent_failed") - rate(BR, "recovered", "agent_failed"),
        conf,
        None if np.isfinite(rec_point) else "an arm has no failed agent calls",
    )
    fields: dict[str, Any] = {
        "arm": arm,
        "reference": reference,
        "paired_tasks": int(ref.values.shape[0]),
        "gap": gaps,
        "gap_default": g_default,
        "gap_amplification": amp,
        "gap_growth": growth,
        "channel_amplification": channel_amp,
        "amplified_channels": amplified,
        "spearman_rho": rho,
        "spearman_ci_low": rho_lo,
        "spearman_ci_high": rho_hi,
        "spearman_note": rho_note,
        "hallucinated_names_union": len(union),
        "novel_fraction": novel,
        "novel_names": novel_names,
        "success_difference": success_diff,
        "test": test,
        "p_value": p_value,
        "tost_equivalent": equivalent,
        "tost_p": tost_p,
        "tost_margin": options.tost_margin,
        "trajectory_difference": traj,
        "recovery_difference": recovery,
    }
    grows = growth.ci_low is not None and growth.ci_low > 0
    return _Draft(fields, p_value, g_default.gap, bool(amplified), grows)


def _verdict(
    draft: _Draft, significant: bool, p_adj: float | None, margin: float
) -> tuple[Verdict, str]:
    f = draft.fields
    gap = draft.success_gap or 0.0
    p_text = f"adjusted p = {p_adj:.3g}" if p_adj is not None else "no test"
    tost = "TOST-equivalent" if f["tost_equivalent"] else "not TOST-equivalent"
    if significant and gap > 0:
        return "visible damage", f"significant success drop at default K ({gap:+.1%}, {p_text})"
    if not significant and gap > margin:
        return (
            "inconclusive",
            f"success drop {gap:+.1%} is beyond the {margin:.1%} equivalence margin but not "
            f"significant ({p_text}): too few tasks to tell",
        )
    significance = (
        f"a significant gain ({p_text})" if significant else f"not significant ({p_text}, {tost})"
    )
    reasons = []
    if draft.amplified:
        reasons.append("amplified channel(s): " + ", ".join(f["amplified_channels"]))
    if draft.grows:
        g = f["gap_growth"]
        reasons.append(f"gap grows at K={f['gap_amplification'].k_small} (+{g.value:.1%})")
    if reasons:
        return (
            "flat score, amplified failures",
            f"success difference {gap:+.1%} {significance}; " + "; ".join(reasons),
        )
    return (
        "no damage detected",
        f"success difference {gap:+.1%} {significance}; no channel amplified, "
        "no gap growth at small K",
    )


# ---------------------------------------------------------------- the study


def _group(
    episodes: Iterable[Episode], rules: ChannelRules
) -> tuple[
    dict[tuple[str, str], dict[str, list[EpisodeFacts]]], dict[tuple[str, str, str], int], int
]:
    cells: dict[tuple[str, str], dict[str, list[EpisodeFacts]]] = defaultdict(
        lambda: defaultdict(list)
    )
    infra: Counter[tuple[str, str, str]] = Counter()
    read = 0
    for ep in episodes:
        read += 1
        if ep.is_infrastructure_error:
            infra[(ep.model, ep.domain, ep.arm)] += 1
            cells[(ep.model, ep.domain)].setdefault(ep.arm, [])
            continue
        cells[(ep.model, ep.domain)][ep.arm].append(episode_facts(ep, rules))
    for arms in cells.values():  # a fixed order: results must not depend on input order
        for facts in arms.values():
            facts.sort(key=lambda f: (f.task_id, f.trial, f.episode_id))
    return cells, dict(infra), read


def analyze(episodes: Iterable[Episode], options: AnalysisOptions | None = None) -> AnalysisResult:
    """The full diagnostic on a set of episodes (any order; the result does not depend on it)."""
    options = options or AnalysisOptions()
    rules = options.rules or load_rules()
    episodes = list(episodes)
    grouped, infra, read = _group(episodes, rules)
    if read == 0:
        raise InputError("no episodes in the input")
    if options.reference is not None and not any(options.reference in a for a in grouped.values()):
        arms_seen = sorted({a for arms in grouped.values() for a in arms})
        raise InputError(
            f"reference arm {options.reference!r} is not in the input (arms: {arms_seen})",
            field="--reference",
        )
    warnings: list[str] = []

    all_facts = [f for arms in grouped.values() for fl in arms.values() for f in fl]
    recorded = recorded_max_errors(all_facts)
    if recorded is not None:
        default_k, k_source = recorded - 1, f"recorded max_errors = {recorded} → K = {recorded - 1}"
        if len({f.max_errors for f in all_facts}) > 1:
            warnings.append(
                "episodes ran under different error budgets; default K uses the smallest "
                f"(max_errors = {recorded})"
            )
    else:
        default_k, k_source = FALLBACK_DEFAULT_K, "no recorded budget: τ²'s default K = 9"
    budgets = sorted(
        set(options.budgets if options.budgets is not None else range(default_k + 1)) | {default_k}
    )
    if recorded is not None and max(budgets) >= recorded:
        warnings.append(
            f"S(K) for K ≥ {recorded} is not recomputable: episodes stopped at max_errors = "
            f"{recorded} (values there are lower bounds, marked recomputable: false)"
        )
    if options.count == "agent" and any(
        f.counted == "all" and f.termination == "too_many_errors" for f in all_facts
    ):
        warnings.append(
            "--count agent on episodes cut by a budget that counted user errors too: S(K) "
            "may be understated for those episodes"
        )

    draft_cells: list[tuple[dict[str, Any], list[_Draft]]] = []
    for model, domain in sorted(grouped):
        arms = grouped[(model, domain)]
        cell_warnings: list[str] = []
        named = options.reference
        if named is not None and named not in arms:
            cell_warnings.append(
                f"reference {named!r} not in this cell; using the highest precision present"
            )
            named = None
        reference, reason = choose_reference(arms, named)
        order = precision_order(arms)
        stats = {
            a: arm_stats(
                a,
                arms[a],
                infra.get((model, domain, a), 0),
                budgets,
                options.count,
                budget_curve_intervals(
                    arms[a],
                    budgets,
                    options.count,
                    options.bootstrap,
                    stable_rng(options.seed, model, domain, a, "S(K)"),
                    options.confidence,
                ),
            )
            for a in order
        }
        task_sets = [set(f.task_id for f in arms[a]) for a in order if arms[a]]
        common = sorted(set.intersection(*task_sets)) if task_sets else []
        every = set().union(*task_sets) if task_sets else set()
        if len(common) < len(every):
            cell_warnings.append(
                f"{len(every) - len(common)} task(s) not run by every arm are left out of the "
                "paired comparisons"
            )
        drafts: list[_Draft] = []
        if not arms[reference]:
            cell_warnings.append(f"reference {reference!r} has no usable episodes: no comparison")
        elif len(order) > 1 and common:
            cols = _columns(budgets)
            names = sorted({n for a in order for f in arms[a] for n in f.hallucinated})
            sums = {
                a: task_sums(arms[a], common, names, budgets, options.count, cols) for a in order
            }
            weights = resample_counts(
                len(common), options.bootstrap, stable_rng(options.seed, model, domain)
            )
            for a in order:
                if a == reference or not arms[a]:
                    continue
                drafts.append(
                    compare(
                        a,
                        reference,
                        sums[reference],
                        sums[a],
                        weights,
                        names,
                        budgets,
                        default_k,
                        cols,
                        options,
                    )
                )
        elif len(order) > 1:
            cell_warnings.append("no task was run by every arm: no paired comparison")
        cell = {
            "model": model,
            "domain": domain,
            "reference": reference,
            "reference_reason": reason,
            "arms": [stats[a] for a in order],
            "risk_screen": risk_screen(stats[reference], options.risk_threshold),
            "warnings": cell_warnings,
        }
        draft_cells.append((cell, drafts))

    tested = [d for _, ds in draft_cells for d in ds if d.p_value is not None]
    raw = [d.p_value for d in tested if d.p_value is not None]
    holm = dict(zip(map(id, tested), adjust_pvalues(raw, "holm"), strict=True))
    bh = dict(zip(map(id, tested), adjust_pvalues(raw, "bh"), strict=True))
    cells: list[Cell] = []
    for cell, drafts in draft_cells:
        comparisons = []
        for d in drafts:
            p_holm, p_bh = holm.get(id(d)), bh.get(id(d))
            p_adj = p_holm if options.correction == "holm" else p_bh
            significant = p_adj is not None and p_adj < options.alpha
            verdict, why = _verdict(d, significant, p_adj, options.tost_margin)
            comparisons.append(
                Comparison(
                    **d.fields,
                    p_holm=p_holm,
                    p_bh=p_bh,
                    p_adjusted=p_adj,
                    significant=significant,
                    verdict=verdict,
                    verdict_reason=why,
                )
            )
        if comparisons:
            worst = min(comparisons, key=lambda c: VERDICT_ORDER.index(c.verdict))
            verdict, why = (
                worst.verdict,
                f"{worst.arm} vs {worst.reference}: {worst.verdict_reason}",
            )
        else:
            verdict, why = "no damage detected", "only one arm: nothing to compare"
        cells.append(Cell(**cell, comparisons=comparisons, verdict=verdict, verdict_reason=why))

    sources: Counter[str] = Counter(f.tool_list_source for f in all_facts)
    settings = Settings(
        budgets=budgets,
        default_K=default_k,
        default_K_source=k_source,
        count=options.count,
        bootstrap=options.bootstrap,
        seed=options.seed,
        confidence=options.confidence,
        alpha=options.alpha,
        tost_margin=options.tost_margin,
        correction=options.correction,
        risk_threshold=options.risk_threshold,
        reference=options.reference,
        channel_rules=rules.source,
        tool_list_sources=dict(sorted(sources.items())),
        precision_order=precision_order({a for arms in grouped.values() for a in arms}),
    )
    repair = (
        repair_effects(
            episodes,
            RepairOptions(
                reference=options.reference,
                budgets=budgets,
                count=options.count,
                bootstrap=options.bootstrap,
                seed=options.seed,
                confidence=options.confidence,
                rules=rules,
            ),
        )
        if has_repair_runs(episodes)
        else None
    )
    return AnalysisResult(
        flatscore_version=flatscore.__version__,
        settings=settings,
        definitions=definitions(
            options.count, default_k, options.tost_margin, options.correction, options.bootstrap
        ),
        episodes_read=read,
        infrastructure_errors=sum(infra.values()),
        cells=cells,
        warnings=warnings,
        repair=repair,
    )
