"""`analyze --sequential`: the study's run files read as a sequential study would have read
them (docs/analysis.md, "Sequential verdicts").

Per cell, tasks are read in one order: as their episodes finished when the run was
sequential (its episodes say `metadata.stopping: sequential`; finish times from
`timing.ended_at` when every episode has one, else the order of the input), otherwise a
seeded random permutation of the cell's paired tasks (the analysis seed and the cell's
name, stated in the output). Each comparison's per-task success differences at the default
budget and per-task failed-call and call counts (`task_matrix`, the fixed design's own
numbers) are read in that order and decided by `sequential.decide`, every comparison of the
study together (Holm across them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from flatscore.analysis.facts import EpisodeFacts
from flatscore.analysis.result import AnalysisResult, Cell
from flatscore.analysis.sequential import (
    VERDICTS,
    LookStats,
    SequentialDesign,
    decide,
    look_stats,
)
from flatscore.analysis.sequential_result import SequentialComparison, SequentialSummary
from flatscore.analysis.settings import AnalysisSettings
from flatscore.analysis.stats import stable_rng
from flatscore.analysis.task_matrix import task_matrix
from flatscore.episode import Episode

Arms = Mapping[str, Sequence[EpisodeFacts]]
FinishRank = dict[tuple[str, str, str, str], int]
"""(model, domain, arm, episode id) → the episode's place in the order episodes finished."""


def design_for(options: AnalysisSettings) -> SequentialDesign:
    return SequentialDesign(margin=options.tost_margin, alpha=options.alpha)


def describe(design: SequentialDesign) -> str:
    levels = design.levels()
    return (
        f"looks every {design.look_every} paired tasks and at the maximum; damage (gap > 0, "
        f"one-sided α = {levels['damage']:g}) and amplification (all-channel failed-call "
        f"ratio > 1, α = {levels['amplified']:g}) with Holm across the study's comparisons "
        "(group-sequential form); equivalence (TOST ±"
        f"{100 * design.margin:g} points, α = {levels['equivalent_low']:g} each side) and a "
        f"bounded ratio (< ×{design.ratio_margin:g}, α = {levels['bounded']:g}) uncorrected; "
        "Hwang–Shih–DeCani spending, γ = "
        f"{design.gamma_damage:g} (damage, amplification) and {design.gamma_equivalence:g} "
        "(equivalence, bound); the last look spends what is left"
    )


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
) -> list[str]:
    if not sequential_run:
        rng = stable_rng(seed, "sequential", cell.model, cell.domain)
        return [common[i] for i in rng.permutation(len(common))]
    done: dict[str, int] = {}
    for arm, facts in arms.items():
        for f in facts:
            rank = ranks.get((cell.model, cell.domain, arm, f.episode_id), 0)
            done[f.task_id] = max(done.get(f.task_id, rank), rank)
    return sorted(common, key=lambda t: (done.get(t, 0), t))


def replay(
    result: AnalysisResult,
    grouped: Mapping[tuple[str, str], Arms],
    episodes: Sequence[Episode],
    options: AnalysisSettings,
) -> AnalysisResult:
    """`result` with a `sequential` object on every comparison and one for the study."""
    design = design_for(options)
    ranks, sequential_cells = finish_ranks(episodes)
    k = result.settings.default_K
    plans: list[tuple[int, int, list[str]]] = []  # (cell, comparison, task order)
    stats: list[LookStats] = []
    common_by_cell: dict[int, set[str]] = {}
    for ci, cell in enumerate(result.cells):
        arms = grouped[(cell.model, cell.domain)]
        task_sets = [{f.task_id for f in facts} for facts in arms.values() if facts]
        common = sorted(set.intersection(*task_sets)) if task_sets else []
        common_by_cell[ci] = set(common)
        ran_sequentially = (cell.model, cell.domain) in sequential_cells
        for j, comp in enumerate(cell.comparisons):
            pair = {cell.reference: arms[cell.reference], comp.arm: arms[comp.arm]}
            order = _task_order(cell, pair, common, ranks, ran_sequentially, options.seed)
            order = order[: options.sequential_max_tasks or len(order)]
            ref = task_matrix(arms[cell.reference], order, [k], options.count)
            alt = task_matrix(arms[comp.arm], order, [k], options.count)
            stats.append(
                look_stats(
                    ref.column(f"S{k}") - alt.column(f"S{k}"),
                    alt.column("agent_failed"),
                    alt.column("calls"),
                    ref.column("agent_failed"),
                    ref.column("calls"),
                    design,
                    options.sequential_max_tasks,
                )
            )
            plans.append((ci, j, order))
    if not stats:
        return result
    decisions = decide(stats, design)
    tasks_read = decisions.tasks([s.counts for s in stats])
    cells = [c.model_copy(deep=True) for c in result.cells]
    ref_read: dict[int, set[str]] = {}
    used = available = 0
    for (ci, j, order), st, v, decided, n in zip(
        plans, stats, decisions.verdict, decisions.decided, tasks_read, strict=True
    ):
        cell = cells[ci]
        arms = grouped[(cell.model, cell.domain)]
        comp = cell.comparisons[j]
        read = set(order[: int(n)])
        ref_read.setdefault(ci, set()).update(read)
        arm_n = sum(f.task_id in read for f in arms[comp.arm])
        ref_n = sum(f.task_id in read for f in arms[cell.reference])
        used += arm_n
        available += sum(f.task_id in common_by_cell[ci] for f in arms[comp.arm])
        cell.comparisons[j] = comp.model_copy(
            update={
                "sequential": SequentialComparison(
                    verdict=VERDICTS[int(v)],
                    decided=bool(decided),
                    tasks=int(n),
                    tasks_available=len(order),
                    episodes=arm_n + ref_n,
                    more_tasks=st.maximum - int(n) if not decided and n < st.maximum else None,
                )
            }
        )
    for ci, read in ref_read.items():  # the reference runs while any arm of its cell is open
        reference = grouped[(cells[ci].model, cells[ci].domain)][cells[ci].reference]
        used += sum(f.task_id in read for f in reference)
        available += sum(f.task_id in common_by_cell[ci] for f in reference)
    any_sequential = bool(sequential_cells & {(c.model, c.domain) for c in cells})
    order_text = (
        "tasks in the order their episodes finished (a sequential run)"
        if any_sequential
        else f"tasks in a seeded random order per cell (seed {options.seed} and the cell's "
        "model and domain; the run was not sequential)"
    )
    summary = SequentialSummary(
        order=order_text,
        design=describe(design),
        tasks=int(tasks_read.sum()),
        tasks_available=sum(len(order) for _, _, order in plans),
        episodes=used,
        episodes_available=available,
        saving=1.0 - used / available if available else 0.0,
    )
    return result.model_copy(update={"cells": cells, "sequential": summary})
