"""The analysis' own warnings in words: what reading left out (attempts superseded by a
rerun, duplicates under `--dedupe`) or could not settle (a setting the run files record
differently); episodes a narrowed read left out (`--trial-range`, `--balanced`), τ² results
read by its conventions, error budgets that differ or stop S(K) from being recomputed; a
cell's (a named reference it lacks, tasks left out of its paired comparisons, no usable
reference, no common task); the repair effect's. The analysis keeps them as data
(`analysis.notices.Notice`); analysis.json's `warnings` (the analysis', each cell's and the
repair effect's), the terminal and the gate's warnings carry these words
(`analysis_text.worded`, `gate_text.worded_gate`, `worded_repair`)."""

from __future__ import annotations

from flatscore.analysis.notices import Notice
from flatscore.analysis.repair_effect import RepairCell, RepairEffectResult
from flatscore.analysis.trials import trials_text


def warning(n: Notice) -> str:
    """One notice in words."""
    if n.kind == "attempts_superseded":
        return (
            f"{n.count} infrastructure-error attempt(s) superseded by a later attempt of "
            "the same episode (rerun by --resume): the latest attempt is used"
        )
    if n.kind == "duplicates_left_out":
        return (
            f"--dedupe: {n.count} duplicate episode(s) left out (first: {' and '.join(n.places)})"
        )
    if n.kind == "settings_differ":
        return (
            f"the run files record different study settings for {n.setting} "
            f"({', '.join(map(str, n.values))}): none used; give it as an option"
        )
    if n.kind == "trials_left_out":
        return (
            f"--trial-range {trials_text(n.trials)}: {n.count} of {n.total} episodes of other "
            "trials left out"
        )
    if n.kind == "balanced_left_out":
        return (
            f"--balanced: {n.count} of {n.total} episodes left out (a (domain, task, trial) "
            "that some arm of its cell lacks)"
        )
    if n.kind == "tau2_inferred_errors":
        return (
            f"{n.count} τ² tool result(s) had no error flag and were counted as failed because "
            "their text starts with 'Error:' (τ²'s convention)"
        )
    if n.kind == "tau2_trial_from_order":
        return f"{n.count} τ² simulation(s) had no trial number: numbered per task in file order"
    if n.kind == "mixed_budgets":
        return (
            "episodes ran under different error budgets; default K uses the smallest "
            f"(max_errors = {n.budget})"
        )
    if n.kind == "not_recomputable":
        return (
            f"S(K) for K ≥ {n.budget} is not recomputable: episodes stopped at max_errors = "
            f"{n.budget} (values there are lower bounds, marked recomputable: false)"
        )
    if n.kind == "agent_count_understated":
        return (
            "--count agent on episodes cut by a budget that counted user errors too: S(K) may "
            "be understated for those episodes"
        )
    return _cell_warning(n)


def _cell_warning(n: Notice) -> str:
    """A cell's notice (the analysis' or the repair effect's) in words."""
    if n.kind == "reference_not_in_cell":
        return f"reference {n.arm!r} not in this cell; deciding from the arm names"
    if n.kind == "paired_per_arm":
        return (
            "a sequential run: each comparison is paired on the tasks its arm and the "
            "reference both ran (arms stopped at different looks)"
        )
    if n.kind == "tasks_left_out":
        return (
            f"{n.count} task(s) not run by every arm are left out of the paired comparisons "
            "(arm tables use all of an arm's tasks)"
        )
    if n.kind == "reference_unusable":
        return f"reference {n.arm!r} has no usable episodes: no comparison"
    if n.kind == "no_common_task":
        return "no task was run by every arm: no paired comparison"
    if n.kind == "repair_unmatched":
        return f"{n.model}/{n.domain}: repair runs without a matching plain run"
    if n.kind == "repair_tasks_left_out":
        return f"{n.count} task(s) not run by every arm with and without repair are left out"
    if n.kind == "repair_no_common_task":
        return "no task was run by every group: no comparison"
    assert n.kind == "repair_few_tasks"
    return (
        f"{n.count} paired task(s): too few for bootstrap intervals of the channel-rate "
        f"effects (needs ≥ {n.minimum})"
    )


def warnings(notices: list[Notice]) -> list[str]:
    """The notices in words, in order."""
    return [warning(n) for n in notices]


def worded_repair(result: RepairEffectResult) -> RepairEffectResult:
    """The repair effect with its warnings and its cells' in words, after any already
    there (itself when nothing is left to word)."""
    cells = [_worded_repair_cell(c) for c in result.cells]
    if not result.notices and all(new is old for new, old in zip(cells, result.cells, strict=True)):
        return result
    said = [*result.warnings, *warnings(result.notices)]
    return result.model_copy(update={"cells": cells, "warnings": said, "notices": []})


def _worded_repair_cell(cell: RepairCell) -> RepairCell:
    if not cell.notices:
        return cell
    said = [*cell.warnings, *warnings(cell.notices)]
    return cell.model_copy(update={"warnings": said, "notices": []})
