"""What an analysis warns about, as data: what happened and its numbers. Reading: attempts
superseded by a rerun, duplicates left out by `--dedupe`, a setting the run files record
differently. The analysis: episodes left out by `--trial-range` or `--balanced`, τ² inputs
read by convention, error budgets that differ or stop S(K) from being recomputed. A cell: a
named reference it lacks, tasks left out of its paired comparisons, a reference with no
usable episode. The repair effect: repair runs without a plain twin, tasks left out, too few
tasks for its intervals. `analyze` keeps them in `AnalysisResult.notices` (a cell's in
`Cell.notices`, the repair effect's in its own); the words are the report's
(`flatscore.report.warning_text`), filled into `warnings` when the analysis is written or
shown."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field

from flatscore.analysis.outputs import AnalysisModel

NoticeKind = Literal[
    "attempts_superseded",
    "duplicates_left_out",
    "settings_differ",
    "trials_left_out",
    "balanced_left_out",
    "tau2_inferred_errors",
    "tau2_trial_from_order",
    "mixed_budgets",
    "not_recomputable",
    "agent_count_understated",
    "reference_not_in_cell",
    "paired_per_arm",
    "tasks_left_out",
    "reference_unusable",
    "no_common_task",
    "repair_unmatched",
    "repair_tasks_left_out",
    "repair_no_common_task",
    "repair_few_tasks",
]


class Notice(AnalysisModel):
    """One warning's facts: `count` of `total` (episodes left out, results or simulations
    read by convention, attempts, duplicates, tasks), `budget` (a recorded max_errors),
    `trials` (the trials read), `minimum` (the tasks a bootstrap needs), `arm` (the reference
    a cell names), `model` and `domain` (the cell), `setting` and `values` (a study setting
    the run files record differently, as recorded), `places` (where the first duplicate was
    read, as the duplicate error names them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: NoticeKind
    count: int = 0
    total: int = 0
    budget: int = 0
    trials: tuple[int, ...] = Field(default=())
    minimum: int = 0
    arm: str = ""
    model: str = ""
    domain: str = ""
    setting: str = ""
    values: tuple[Any, ...] = Field(default=())
    places: tuple[str, ...] = Field(default=())


def left_out(kind: NoticeKind, before: int, after: int, **facts: object) -> list[Notice]:
    """The notice a narrowed read carries (none when nothing was left out)."""
    if before == after:
        return []
    return [
        Notice.model_validate({"kind": kind, "count": before - after, "total": before, **facts})
    ]
