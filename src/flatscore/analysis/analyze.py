"""The study driver: episodes → AnalysisResult (docs/analysis.md).

Group episodes into cells (model, domain) and arms, measure each arm (`arm_stats`), compare
each arm with its cell's reference on the tasks every arm ran (`comparison.compare`), then
correct the p-values across the whole study and decide the verdicts (`comparison.finalize`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Iterable

import numpy as np

import flatscore
from flatscore.analysis.arm_stats import arm_stats
from flatscore.analysis.balanced import balanced
from flatscore.analysis.budget import budgets_with, default_budget, recorded_max_errors
from flatscore.analysis.channels import ChannelRules, load_rules
from flatscore.analysis.comparison import (
    VERDICT_ORDER,
    compare,
    correct_channels,
    finalize,
    worst,
)
from flatscore.analysis.cost import cost_summary
from flatscore.analysis.facts import EpisodeFacts, episode_facts
from flatscore.analysis.identity import unique_episodes
from flatscore.analysis.noise_floor import CellFloor, noise_floor
from flatscore.analysis.notices import Notice, left_out
from flatscore.analysis.precision import ReferenceUndecided, choose_reference, precision_order
from flatscore.analysis.repair_effect import has_repair_runs, repair_effects
from flatscore.analysis.result import AnalysisResult, Cell, Comparison, Settings
from flatscore.analysis.risk import risk_screen, with_outcome
from flatscore.analysis.sequential_replay import replay
from flatscore.analysis.settings import AnalysisSettings
from flatscore.analysis.stats import adjust_pvalues, resample_counts, stable_rng
from flatscore.analysis.task_matrix import TaskMatrix, task_matrix
from flatscore.analysis.trials import pick_trials, trials_text
from flatscore.episode import Episode
from flatscore.errors import InputError

__all__ = ["VERDICT_ORDER", "AnalysisOptions", "AnalysisSettings", "analyze"]

AnalysisOptions = AnalysisSettings
"""The old name of `AnalysisSettings` (the one settings model), kept for the tests that use it."""


Grouped = dict[tuple[str, str], dict[str, list[EpisodeFacts]]]


def _group(
    episodes: Iterable[Episode],
    rules: ChannelRules,
    controls: dict[tuple[str, str], str],
    planted: set[tuple[str, str]] | None = None,
) -> tuple[Grouped, dict[tuple[str, str, str], int], int, Counter[str]]:
    """Episodes by cell and arm; `controls` collects (model, arm) → the arm a negative
    control replicates (its episodes say so in `metadata.control_of`), `planted` the
    (model, arm) whose damage was planted (`metadata.injected`): neither is a reference."""
    cells: Grouped = defaultdict(lambda: defaultdict(list))
    infra: Counter[tuple[str, str, str]] = Counter()
    tau2: Counter[str] = Counter()
    read = 0
    for ep in episodes:
        read += 1
        control = ep.metadata.get("control_of")
        if isinstance(control, str):
            controls[(ep.model, ep.arm)] = control
        if planted is not None and isinstance(ep.metadata.get("injected"), dict):
            planted.add((ep.model, ep.arm))
        tau2["inferred_errors"] += int(ep.metadata.get("tau2_inferred_errors", 0) or 0)
        tau2["trial_from_order"] += bool(ep.metadata.get("tau2_trial_from_file_order"))
        if ep.is_infrastructure_error:
            infra[(ep.model, ep.domain, ep.arm)] += 1
            cells[(ep.model, ep.domain)].setdefault(ep.arm, [])
            continue
        cells[(ep.model, ep.domain)][ep.arm].append(episode_facts(ep, rules))
    for arms in cells.values():  # a fixed order: results must not depend on input order
        for facts in arms.values():
            facts.sort(key=lambda f: (f.task_id, f.trial, f.episode_id))
    return cells, dict(infra), read, tau2


def _input_notices(tau2: Counter[str]) -> list[Notice]:
    """τ² results read by its conventions: errors inferred from text, trials from order."""
    return [
        Notice(kind=kind, count=tau2[key])
        for kind, key in (
            ("tau2_inferred_errors", "inferred_errors"),
            ("tau2_trial_from_order", "trial_from_order"),
        )
        if tau2[key]
    ]


def analyze(episodes: Iterable[Episode], options: AnalysisSettings | None = None) -> AnalysisResult:
    """The full diagnostic on a set of episodes (any order; the result does not depend on it).
    Duplicate episodes are an InputError unless `options.dedupe`."""
    options = options or AnalysisSettings()
    rules = options.rules or load_rules()
    unique, read_notices = unique_episodes(((None, ep) for ep in episodes), options.dedupe)
    notices: list[Notice] = read_notices  # the warnings as data, worded by the report
    if options.trials is not None:
        read_all = len(unique)
        unique = pick_trials(unique, options.trials)
        if read_all and not unique:
            raise InputError(
                f"no episode of trials {trials_text(options.trials)} in the input "
                "(trials are counted from 1)",
                field="trials",
            )
        notices += left_out("trials_left_out", read_all, len(unique), trials=tuple(options.trials))
    if options.balanced:
        read_all = len(unique)
        unique = balanced(unique)
        notices += left_out("balanced_left_out", read_all, len(unique))
    controls: dict[tuple[str, str], str] = {}
    planted: set[tuple[str, str]] = set()
    grouped, infra, read, tau2 = _group(unique, rules, controls, planted)
    if read == 0:
        raise InputError("no episodes in the input")
    if options.reference is not None and not any(options.reference in a for a in grouped.values()):
        arms_seen = sorted({a for arms in grouped.values() for a in arms})
        raise InputError(
            f"reference arm {options.reference!r} is not in the input (arms: {arms_seen})",
            field="--reference",
        )
    notices += _input_notices(tau2)
    all_facts = [f for arms in grouped.values() for fl in arms.values() for f in fl]
    default_k, k_source = default_budget(all_facts, options.count)
    recorded = recorded_max_errors(all_facts)
    if recorded is not None and len({f.max_errors for f in all_facts}) > 1:
        notices.append(Notice(kind="mixed_budgets", budget=recorded))
    budgets = budgets_with(options.budgets, default_k)
    if recorded is not None and max(budgets) >= recorded:
        notices.append(Notice(kind="not_recomputable", budget=recorded))
    if options.count == "agent" and any(
        f.counted == "all" and f.termination == "too_many_errors" for f in all_facts
    ):
        notices.append(Notice(kind="agent_count_understated"))

    drafts: list[tuple[dict[str, object], list[Comparison]]] = []
    sequential_runs = {
        (ep.model, ep.domain) for ep in unique if ep.metadata.get("stopping") == "sequential"
    }
    for model, domain in sorted(grouped):
        cell, comparisons = _cell(
            model,
            domain,
            grouped[(model, domain)],
            infra,
            budgets,
            default_k,
            options,
            controls,
            (model, domain) in sequential_runs,
            planted,
        )
        drafts.append((cell, comparisons))

    # Channel amplification: one multiplicity family over the whole study.
    keyed = [(f"{cell['model']} / {cell['domain']}", c) for cell, cs in drafts for c in cs]
    corrected, channel_family = correct_channels(keyed, options.correction, options.alpha)
    it = iter(corrected)
    drafts = [(cell, [next(it) for _ in cs]) for cell, cs in drafts]
    tested = [c for _, cs in drafts for c in cs if c.p_value is not None]
    raw = [c.p_value for c in tested if c.p_value is not None]
    holm = dict(zip(map(id, tested), adjust_pvalues(raw, "holm"), strict=True))
    bh = dict(zip(map(id, tested), adjust_pvalues(raw, "bh"), strict=True))
    # The tight budget's tests: the same correction over the study's comparisons.
    tight = [c for _, cs in drafts for c in cs if len(c.budget_tests) > 1]
    tight_raw = [c.budget_tests[1].p_value for c in tight]
    tight_adj = dict(
        zip(
            map(id, tight),
            adjust_pvalues([p if p is not None else 1.0 for p in tight_raw], options.correction),
            strict=True,
        )
    )
    cells: list[Cell] = []
    for cell, comparisons in drafts:
        done = [
            finalize(
                c, holm.get(id(c)), bh.get(id(c)), options.correction, options, tight_adj.get(id(c))
            )
            for c in comparisons
        ]
        verdict = worst(done).verdict if done else "nothing to compare"
        cell["risk_screen"] = with_outcome(cell["risk_screen"], done)  # type: ignore[arg-type]
        # the reason in words is the report's (`report.verdict_reason`)
        cells.append(Cell(**cell, comparisons=done, verdict=verdict, verdict_reason=""))

    sources: Counter[str] = Counter(f.tool_list_source for f in all_facts)
    settings = Settings(
        **options.model_dump(exclude={"rules", "budgets", "prices"}),
        prices=options.prices,
        budgets=budgets,
        default_K=default_k,
        default_K_source="",  # words: the report's (`report.budget_text`)
        default_K_from=k_source,
        channel_rules=rules.source,
        tool_list_sources=dict(sorted(sources.items())),
        precision_order=precision_order({a for arms in grouped.values() for a in arms}),
    )
    repair = (
        repair_effects(
            unique,
            options.model_copy(update={"budgets": budgets, "rules": rules}),
        )
        if has_repair_runs(unique)
        else None
    )
    result = AnalysisResult(
        flatscore_version=flatscore.__version__,
        settings=settings,
        definitions={},  # words, from the settings: the report's (`report.definitions`)
        episodes_read=read,
        infrastructure_errors=sum(infra.values()),
        cells=cells,
        warnings=[],  # words: the report's (`report.warning_text`), from `notices`
        notices=notices,
        repair=repair,
        channel_family=channel_family,
        cost=cost_summary(unique, options.prices),
    )
    if options.sequential:
        result = replay(result, grouped, unique, options)
    return result


def _cell(
    model: str,
    domain: str,
    arms: dict[str, list[EpisodeFacts]],
    infra: dict[tuple[str, str, str], int],
    budgets: list[int],
    default_k: int,
    options: AnalysisSettings,
    controls: dict[tuple[str, str], str],
    per_pair: bool = False,
    planted: Collection[tuple[str, str]] = (),
) -> tuple[dict[str, object], list[Comparison]]:
    """One cell's arms and (not yet corrected) comparisons. A negative control is never
    chosen as the reference. `per_pair` (a sequential run's cell): each comparison on the
    tasks its arm and the reference both ran."""
    notices: list[Notice] = []  # the cell's warnings as data, worded by the report
    named = options.reference
    if named is not None and named not in arms:
        notices.append(Notice(kind="reference_not_in_cell", arm=named))
        named = None
    try:
        candidates = [
            a for a in arms if (model, a) not in controls and (model, a) not in planted
        ] or list(arms)
        reference, reason = choose_reference(candidates, named)
    except ReferenceUndecided as exc:
        raise InputError(
            f"{model} / {domain}: {exc}, and the run files do not record their study's "
            "reference; name it with --reference"
        ) from None
    order = [reference, *(a for a in precision_order(arms) if a != reference)]
    stats = {
        a: arm_stats(
            a, arms[a], infra.get((model, domain, a), 0), budgets, options.count, options.confidence
        )
        for a in order
    }
    task_sets = [{f.task_id for f in arms[a]} for a in order if arms[a]]
    common = sorted(set.intersection(*task_sets)) if task_sets else []
    every = set().union(*task_sets) if task_sets else set()
    ref_tasks = {f.task_id for f in arms[reference]}
    # Each arm's paired tasks: those every arm ran, or in a sequential run (arms stop at
    # different looks) those the arm and the reference both ran.
    pairs = {
        a: sorted(ref_tasks & {f.task_id for f in arms[a]}) if per_pair else common
        for a in order
        if a != reference and arms[a]
    }
    if per_pair and len(common) < len(every):
        notices.append(Notice(kind="paired_per_arm"))
    elif len(common) < len(every):
        notices.append(Notice(kind="tasks_left_out", count=len(every) - len(common)))
    comparisons: list[Comparison] = []
    if not arms[reference]:
        notices.append(Notice(kind="reference_unusable", arm=reference))
    elif len(order) > 1 and (any(pairs.values()) if per_pair else common):
        names = sorted({n for a in order for f in arms[a] for n in f.hallucinated})
        gap_ks = sorted({min(budgets), default_k})
        shared: dict[tuple[str, ...], tuple[TaskMatrix, np.ndarray | None, CellFloor]] = {}
        for a in order:
            if a == reference or not pairs.get(a):
                continue
            tasks = tuple(pairs[a])
            if tasks not in shared:  # one reference matrix, resampling and floor per task set
                weights = (
                    resample_counts(
                        len(tasks), options.bootstrap, stable_rng(options.seed, model, domain)
                    )
                    if len(tasks) >= options.bootstrap_min_tasks
                    else None
                )
                ref_m = task_matrix(arms[reference], list(tasks), budgets, options.count, names)
                floor = CellFloor(
                    arms[reference], list(tasks), budgets, options.count, names, weights
                )
                shared[tasks] = (ref_m, weights, floor)
            ref_m, weights, floor = shared[tasks]
            alt_m = task_matrix(arms[a], list(tasks), budgets, options.count, names)
            c = compare(a, reference, ref_m, alt_m, budgets, default_k, options, weights)
            beside = noise_floor(floor, ref_m, alt_m, arms[a], gap_ks, options.confidence)
            control = controls.get((model, a))
            comparisons.append(c.model_copy(update={"noise_floor": beside, "control_of": control}))
    elif len(order) > 1:
        notices.append(Notice(kind="no_common_task"))
    cell: dict[str, object] = {
        "model": model,
        "domain": domain,
        "reference": reference,
        "reference_reason": "",  # words: the report's (`report.reference_text`)
        "reference_why": reason,
        "arms": [stats[a] for a in order],
        "risk_screen": risk_screen(stats[reference], options.risk_threshold),
        "warnings": [],  # words: the report's (`report.warning_text`), from `notices`
        "notices": notices,
    }
    return cell, comparisons
