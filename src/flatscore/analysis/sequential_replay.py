"""`analyze --sequential`: the study's run files read as a sequential study would have read
them (docs/analysis.md, "Sequential verdicts").

Per cell, tasks are read in one order: when the run was sequential (its episodes say
`metadata.stopping: sequential`), the order it read them (`metadata.task_rank`, which
`flatscore run` records, against the design maximum it records, `sequential_max_tasks`;
each comparison on the tasks its pair ran) or, without those, as its episodes finished
(`timing.ended_at` when every episode has one, else the order of the input); otherwise a
seeded random permutation of the cell's paired tasks (the analysis seed and the cell's
name, stated in the output). Each comparison's per-task success differences at the default
budget and per-task failed-call and call counts (`task_matrix`, the fixed design's own
numbers) are read in that order and decided by `sequential.decide`, every comparison of the
study together (Holm across them). The channels tested per comparison are those the fixed
design tested (the members of its channel family), with the same denominators.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from flatscore.analysis.facts import EpisodeFacts
from flatscore.analysis.result import AnalysisResult, Cell, Comparison
from flatscore.analysis.sequential import (
    VERDICTS,
    LookStats,
    SequentialDesign,
    SequentialVerdict,
    decide,
    look_stats,
)
from flatscore.analysis.sequential_channels import ChannelCounts
from flatscore.analysis.sequential_estimates import repeated_intervals
from flatscore.analysis.sequential_result import (
    AfterStop,
    SequentialComparison,
    SequentialSummary,
    TaskOrder,
)
from flatscore.analysis.settings import AnalysisSettings
from flatscore.analysis.stats import stable_rng
from flatscore.analysis.task_matrix import MALFORMED, TaskMatrix, task_matrix
from flatscore.episode import Episode

Arms = Mapping[str, Sequence[EpisodeFacts]]
FinishRank = dict[tuple[str, str, str, str], int]
"""(model, domain, arm, episode id) → the episode's place in the order episodes finished."""


def design_for(options: AnalysisSettings) -> SequentialDesign:
    return SequentialDesign(margin=options.tost_margin, alpha=options.alpha)


def finish_ranks(episodes: Sequence[Episode]) -> tuple[FinishRank, set[tuple[str, str]]]:
    """Each episode's finish rank (by `timing.ended_at` when every episode has one, else
    input order) and the (model, domain) cells whose run was sequential."""
    timed = all(ep.timing.ended_at for ep in episodes)
    order = sorted(
        range(len(episodes)),
        key=lambda i: (episodes[i].timing.ended_at or "", i) if timed else (i,),
    )
    ranks = {
        (episodes[i].model, episodes[i].domain, episodes[i].arm, episodes[i].episode_id): r
        for r, i in enumerate(order)
    }
    sequential = {
        (ep.model, ep.domain) for ep in episodes if ep.metadata.get("stopping") == "sequential"
    }
    return ranks, sequential


def _task_order(
    cell: Cell,
    arms: Arms,
    common: list[str],
    ranks: FinishRank,
    sequential_run: bool,
    seed: int,
    planned: Mapping[str, int],
) -> list[str]:
    if not sequential_run:
        rng = stable_rng(seed, "sequential", cell.model, cell.domain)
        return [common[i] for i in rng.permutation(len(common))]
    if all(t in planned for t in common):  # `flatscore run` recorded its task order
        return sorted(common, key=lambda t: planned[t])
    done: dict[str, int] = {}
    for arm, facts in arms.items():
        for f in facts:
            rank = ranks.get((cell.model, cell.domain, arm, f.episode_id), 0)
            done[f.task_id] = max(done.get(f.task_id, rank), rank)
    return sorted(common, key=lambda t: (done.get(t, 0), t))


def planned_order(episodes: Sequence[Episode]) -> dict[tuple[str, str], dict[str, int]]:
    """Per (model, domain): each task's place in a sequential run's order (`task_rank`, as
    `flatscore run` with `stopping: sequential` records it)."""
    out: dict[tuple[str, str], dict[str, int]] = {}
    for ep in episodes:
        rank = ep.metadata.get("task_rank")
        if isinstance(rank, int):
            out.setdefault((ep.model, ep.domain), {})[ep.task_id] = rank
    return out


def planned_maximum(episodes: Sequence[Episode]) -> dict[tuple[str, str], int]:
    """Per (model, domain): a sequential run's design maximum (`sequential_max_tasks`)."""
    out: dict[tuple[str, str], int] = {}
    for ep in episodes:
        most = ep.metadata.get("sequential_max_tasks")
        if isinstance(most, int):
            key = (ep.model, ep.domain)
            out[key] = max(out.get(key, 0), most)
    return out


def channel_counts(comp: Comparison, ref: TaskMatrix, alt: TaskMatrix) -> ChannelCounts:
    """The channels the fixed design tested for this comparison, per task in `ref`'s order."""
    names = tuple(ch for ch, a in comp.channel_amplification.items() if a.p_value is not None)

    def stack(m: TaskMatrix, which: str) -> np.ndarray:
        cols = [
            ch if which == "num" else "attempts" if ch == MALFORMED else "calls" for ch in names
        ]
        return np.stack([m.column(c) for c in cols]) if cols else np.zeros((0, len(m.tasks)))

    return ChannelCounts(
        names, stack(alt, "num"), stack(alt, "den"), stack(ref, "num"), stack(ref, "den")
    )


def _scaled(episodes: int, tasks: int, maximum: int) -> int:
    """Episodes a comparison would have read at its design's maximum (its episodes per task
    read, times the maximum)."""
    return round(episodes * maximum / tasks) if tasks else 0


def after_stop(
    differences: np.ndarray,
    look: int,
    stats: LookStats,
    design: SequentialDesign,
    fixed_tasks: int,
    ran_sequentially: bool,
) -> AfterStop:
    """The gap at look `look` with its repeated confidence interval; the fixed design's
    numbers are conditional on stopping when the run itself stopped this comparison short
    of its maximum (its files hold only the tasks it read)."""
    r = repeated_intervals(differences, np.array(look), stats.counts, stats.maximum, design)
    stopped = ran_sequentially and fixed_tasks < stats.maximum
    return AfterStop(
        tasks=int(r.tasks),
        gap=float(r.estimate),
        ci_low=float(r.low),
        ci_high=float(r.high),
        confidence=1.0 - design.alpha,
        nominal_confidence=float(r.nominal),
        fixed_design="conditional on stopping" if stopped else "all tasks",
    )


def at_maximum(verdict: SequentialVerdict, at_max: bool, fixed: str | None) -> SequentialVerdict:
    """At the design's maximum the sequential reading has the fixed design's tasks, and clears
    a comparison only where the fixed design clears it too: "no damage detected" there stays
    so only if the fixed verdict on the same tasks is also "no damage detected"; else it is
    "inconclusive" (the fixed design's other clauses — the tight budget's drop not ruled out,
    a channel it cannot test, an amplification at its level — are not part of the looks).
    This only withholds a clearance, so no error rate rises."""
    if at_max and verdict == "no damage detected" and fixed != "no damage detected":
        return "inconclusive"
    return verdict


def replay(
    result: AnalysisResult,
    grouped: Mapping[tuple[str, str], Arms],
    episodes: Sequence[Episode],
    options: AnalysisSettings,
) -> AnalysisResult:
    """`result` with a `sequential` object on every comparison and one for the study."""
    design = design_for(options)
    ranks, sequential_cells = finish_ranks(episodes)
    planned, maxima = planned_order(episodes), planned_maximum(episodes)
    k = result.settings.default_K
    plans: list[tuple[int, int, list[str]]] = []  # (cell, comparison, task order)
    stats: list[LookStats] = []
    differences: list[np.ndarray] = []
    common_by_cell: dict[int, set[str]] = {}
    for ci, cell in enumerate(result.cells):
        arms = grouped[(cell.model, cell.domain)]
        task_sets = [{f.task_id for f in facts} for facts in arms.values() if facts]
        common = sorted(set.intersection(*task_sets)) if task_sets else []
        common_by_cell[ci] = set(common)
        key = (cell.model, cell.domain)
        ran_sequentially = key in sequential_cells
        maximum = maxima.get(key, options.sequential_max_tasks)
        for j, comp in enumerate(cell.comparisons):
            pair = {cell.reference: arms[cell.reference], comp.arm: arms[comp.arm]}
            paired = common
            if ran_sequentially:  # decided arms stopped early: each pair's own tasks
                both = [{f.task_id for f in arms[a]} for a in pair]
                paired = sorted(both[0] & both[1])
                common_by_cell.setdefault(ci, set()).update(paired)
            order = _task_order(
                cell, pair, paired, ranks, ran_sequentially, options.seed, planned.get(key, {})
            )
            order = order[: maximum or len(order)]
            ref = task_matrix(arms[cell.reference], order, [k], options.count)
            alt = task_matrix(arms[comp.arm], order, [k], options.count)
            differences.append(ref.column(f"S{k}") - alt.column(f"S{k}"))
            stats.append(
                look_stats(
                    differences[-1],
                    alt.column("agent_failed"),
                    alt.column("calls"),
                    ref.column("agent_failed"),
                    ref.column("calls"),
                    design,
                    maximum,
                    channel_counts(comp, ref, alt),
                )
            )
            plans.append((ci, j, order))
    if not stats:
        return result
    decisions = decide(stats, design)
    amplified_channels: list[list[str]] = [[] for _ in stats]
    for h, owner in enumerate(decisions.channel_owner):
        if decisions.channels[h]:
            offset = h - int(np.searchsorted(decisions.channel_owner, owner))
            amplified_channels[owner].append(stats[owner].channel_names[offset])
    tasks_read = decisions.tasks([s.counts for s in stats])
    cells = [c.model_copy(deep=True) for c in result.cells]
    ref_read: dict[int, set[str]] = {}
    used = available = 0
    for (ci, j, order), st, d, v, decided, at, n, channels in zip(
        plans,
        stats,
        differences,
        decisions.verdict,
        decisions.decided,
        decisions.look,
        tasks_read,
        amplified_channels,
        strict=True,
    ):
        cell = cells[ci]
        arms = grouped[(cell.model, cell.domain)]
        comp = cell.comparisons[j]
        read = set(order[: int(n)])
        ref_read.setdefault(ci, set()).update(read)
        arm_n = sum(f.task_id in read for f in arms[comp.arm])
        ref_n = sum(f.task_id in read for f in arms[cell.reference])
        used += arm_n
        designed = (cell.model, cell.domain) in maxima  # a run that stopped: its design's size
        ran = (cell.model, cell.domain) in sequential_cells
        available += (
            _scaled(arm_n, int(n), st.maximum)
            if designed
            else sum(f.task_id in common_by_cell[ci] for f in arms[comp.arm])
        )
        verdict = at_maximum(VERDICTS[int(v)], int(n) >= st.maximum, comp.verdict)
        decided = decided and verdict != "inconclusive"
        cell.comparisons[j] = comp.model_copy(
            update={
                "sequential": SequentialComparison(
                    verdict=verdict,
                    decided=bool(decided),
                    tasks=int(n),
                    tasks_available=st.maximum if designed else len(order),
                    episodes=arm_n + ref_n,
                    more_tasks=st.maximum - int(n) if not decided and n < st.maximum else None,
                    first_look=design.looks(st.maximum)[0] if not st.counts else None,
                    amplified_channels=channels,
                    after_stop=(
                        after_stop(d, int(at), st, design, comp.paired_tasks, ran)
                        if decided and n < st.maximum
                        else None
                    ),
                    ran_sequentially=ran,
                )
            }
        )
    for ci, read in ref_read.items():  # the reference runs while any arm of its cell is open
        key = (cells[ci].model, cells[ci].domain)
        reference = grouped[key][cells[ci].reference]
        ref_n = sum(f.task_id in read for f in reference)
        used += ref_n
        available += (
            _scaled(ref_n, len(read), maxima[key])
            if key in maxima
            else sum(f.task_id in common_by_cell[ci] for f in reference)
        )
    any_sequential = bool(sequential_cells & {(c.model, c.domain) for c in cells})
    ordered_by: TaskOrder = (
        "recorded" if any_sequential and planned else "finished" if any_sequential else "seeded"
    )
    summary = SequentialSummary(
        order="",  # words: the report's (`report.sequential_text`)
        design="",
        ordered_by=ordered_by,
        tasks=int(tasks_read.sum()),
        tasks_available=sum(
            maxima.get((cells[ci].model, cells[ci].domain), len(order)) for ci, _, order in plans
        ),
        episodes=used,
        episodes_available=available,
        saving=1.0 - used / available if available else 0.0,
    )
    return result.model_copy(update={"cells": cells, "sequential": summary})
