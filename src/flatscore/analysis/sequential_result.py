"""The `sequential` objects of analysis.json (`analyze --sequential`, docs/analysis.md,
"Sequential verdicts"): one per comparison, beside its fixed-design result, and one for the
study. Kept apart from `sequential` so that `result` can include them without the
statistics."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from flatscore.analysis.outputs import AnalysisModel

FixedEstimates = Literal["all tasks", "conditional on stopping"]
"""What the fixed design's numbers of a comparison that stopped early rest on: every task the
run has (a fixed-design run replayed sequentially), or the tasks a sequential run read before
it stopped — a sample chosen by the stop, so its estimates lean away from no difference."""

SequentialVerdictText = Literal[
    "visible damage", "no damage detected", "flat score, amplified failures", "inconclusive"
]


class AfterStop(AnalysisModel):
    """The success gap at the look a comparison stopped at, before its design's maximum, with
    a repeated confidence interval (`sequential_estimates`): it accounts for the stop, which
    the fixed design's interval on the same tasks does not."""

    tasks: int
    """Paired tasks read at the stop (what the estimate rests on)."""
    gap: float
    """Mean per-task success difference at the default budget (reference − arm)."""
    ci_low: float
    ci_high: float
    confidence: float
    """1 − α: the level the repeated interval holds at every look together."""
    nominal_confidence: float
    """The confidence a fixed-design interval as wide would state (1 − 2Φ(−c), c the look's
    boundary)."""
    fixed_design: FixedEstimates
    """What the comparison's fixed-design numbers (gap, ratios, p-values) rest on."""


class SequentialComparison(AnalysisModel):
    """What a sequential study would have decided for this comparison, and when."""

    verdict: SequentialVerdictText
    decided: bool
    tasks: int
    """Paired tasks read at the decision (all of them when undecided)."""
    tasks_available: int
    """Paired tasks in the data (the design's maximum)."""
    episodes: int
    """Episodes read (the arm's and the reference's, on the tasks read)."""
    more_tasks: int | None = Field(None, exclude_if=lambda v: v is None)
    """Undecided before the design's maximum (a run still going): the paired tasks the
    planned looks still allow (absent otherwise)."""
    first_look: int | None = Field(None, exclude_if=lambda v: v is None)
    """Open with no planned look reached yet: the paired tasks of the first look."""
    amplified_channels: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)
    """Channels decided amplified by the look the comparison stopped at (absent when none)."""
    after_stop: AfterStop | None = Field(None, exclude_if=lambda v: v is None)
    """Decided before the design's maximum: the gap at the stop with its repeated confidence
    interval (absent otherwise)."""
    ran_sequentially: bool = Field(False, exclude_if=lambda v: not v)
    """The run itself stopped this way (its episodes were run sequentially): the verdict is
    the study's, not a replay of a fixed-design run (absent for a replay)."""


TaskOrder = Literal["recorded", "finished", "seeded"]
"""How a sequential reading ordered each cell's tasks: the order a sequential run recorded
(`metadata.task_rank`), the order its episodes finished, or a seeded random permutation (the
run was not sequential)."""


class SequentialSummary(AnalysisModel):
    """The study as a sequential run would have read it."""

    order: str
    """How tasks were ordered: as their episodes finished, or a seeded random order (words:
    `analyze` leaves them empty, `flatscore.report.sequential_text` fills them in)."""
    design: str
    """Looks, margins, spending functions and the multiplicity correction, in words (filled
    in by the report, from the settings)."""
    ordered_by: TaskOrder | None = Field(None, exclude=True)
    """`order` as data; not part of the record (None when read back from analysis.json)."""
    tasks: int
    """Paired tasks read over all comparisons."""
    tasks_available: int
    episodes: int
    """Episodes a sequential run would have run: per cell, the reference's on the most tasks
    any of its comparisons read, and each arm's on the tasks its comparison read."""
    episodes_available: int
    saving: float
    """1 − episodes / episodes_available."""
