"""What an analysis warns about, as data: what happened and its numbers (episodes left out by
`--trial-range` or `--balanced`, τ² inputs read by convention, error budgets that differ or
stop S(K) from being recomputed). `analyze` keeps them in `AnalysisResult.notices`; the
words are the report's (`flatscore.report.warning_text`), filled into `warnings` when the
analysis is written or shown."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from flatscore.analysis.outputs import AnalysisModel

NoticeKind = Literal[
    "trials_left_out",
    "balanced_left_out",
    "tau2_inferred_errors",
    "tau2_trial_from_order",
    "mixed_budgets",
    "not_recomputable",
    "agent_count_understated",
]


class Notice(AnalysisModel):
    """One warning's facts: `count` of `total` (episodes left out, results or simulations
    read by convention), `budget` (a recorded max_errors), `trials` (the trials read)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: NoticeKind
    count: int = 0
    total: int = 0
    budget: int = 0
    trials: tuple[int, ...] = Field(default=())


def left_out(kind: NoticeKind, before: int, after: int, **facts: object) -> list[Notice]:
    """The notice a narrowed read carries (none when nothing was left out)."""
    if before == after:
        return []
    return [
        Notice.model_validate({"kind": kind, "count": before - after, "total": before, **facts})
    ]
