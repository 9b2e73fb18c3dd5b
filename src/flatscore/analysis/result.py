"""The output of `flatscore analyze`: pydantic models, serialized as analysis.json.

Scripts and the HTML report read these models, so the field names are a contract: add
fields, never rename. All rates, success rates and gaps are fractions in [0, 1] (reports may
show points). A number that cannot be computed (0/0, a ratio over a zero reference) is
`null`, and the `note` next to it says why.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import Field

from flatscore.analysis.budget import KSource
from flatscore.analysis.channels import CHANNELS, ChannelRules
from flatscore.analysis.margins_result import MarginsResult
from flatscore.analysis.notices import Notice
from flatscore.analysis.outputs import AnalysisModel, CountMode, Interval, NoteCode
from flatscore.analysis.precision import ReferenceWhy
from flatscore.analysis.repair_effect import RepairEffectResult
from flatscore.analysis.sequential_result import SequentialComparison, SequentialSummary
from flatscore.analysis.settings import AnalysisSettings, Correction
from flatscore.analysis.task_sign import METHOD as TASK_SIGN_METHOD
from flatscore.analysis.verdict_rule import BudgetTest, Verdict

ANALYSIS_SCHEMA_VERSION = 1

FLOOR_SE_REACH = 2.0
"""An arm is beyond a signed noise floor only when its difference exceeds the floor plus this
many of the floor's standard errors (docs/analysis.md, "Noise floor")."""

__all__ = [
    "CHANNELS",
    "AnalysisResult",
    "BudgetTest",
    "Correction",
    "CountMode",
    "Interval",
    "Verdict",
]


WEIGHTING = (
    "task-weighted: each task's episodes are averaged first, then tasks are averaged (rates: "
    "Σ per-task mean failures / Σ per-task mean calls), so every task counts once whatever its "
    "number of trials"
)


class ChannelStat(AnalysisModel):
    """Failed agent calls in one channel; rate = count / agent tool calls."""

    count: int
    rate: float | None


class BudgetPoint(AnalysisModel):
    """S(K): share of (non-infrastructure) episodes with reward 1 and ≤ K counted failures."""

    K: int
    success_rate: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    recomputable: bool = True


class Distribution(AnalysisModel):
    """Per-episode distribution of one count."""

    mean: float | None
    sd: float | None
    min: float | None
    p25: float | None
    median: float | None
    p75: float | None
    max: float | None


class TrajectoryStats(AnalysisModel):
    agent_turns: Distribution
    agent_tool_calls: Distribution
    messages: Distribution


class ArmStats(AnalysisModel):
    """Everything measured on one arm of one cell (infrastructure errors excluded)."""

    arm: str
    episodes: int
    infrastructure_errors: int
    tasks: int
    trials_min: int
    trials_max: int
    success_rate: float | None
    average_reward: float | None
    pass_k: list[float]
    agent_tool_calls: int
    failed_agent_calls: int
    unanswered_agent_calls: int
    channels: dict[str, ChannelStat]
    user_tool_calls: int
    user_failed_calls: int
    malformed_outputs: int
    budget_curve: list[BudgetPoint]
    max_failed_calls: int
    recorded_max_errors: int | None
    recovery_rate: float | None
    recovered_calls: int
    failed_calls_with_next_call: int
    episodes_with_failure: int
    episode_recovery_rate: float | None
    repeated_failed_calls: int = 0
    """Failed agent calls whose previous (answered) agent call failed with the same name and
    arguments: the agent looping on the call that had just failed."""
    repeat_share: float | None = None
    """repeated_failed_calls / failed agent calls (task-weighted)."""
    reissued_calls: int = 0
    """Agent calls with the name and arguments of a call that already succeeded earlier in
    the episode (a paid bill paid again)."""
    reissued_failed_calls: int = 0
    """Of reissued_calls, those that failed."""
    reissue_share: float | None = None
    """reissued_calls / agent tool calls (task-weighted)."""
    termination_reasons: dict[str, int]
    trajectory: TrajectoryStats
    hallucinated_names: dict[str, int]
    tool_list_sources: dict[str, int]


class GapPoint(AnalysisModel):
    """Gap(K) = S_ref(K) − S_arm(K) on the tasks both arms ran, with its 95% CI."""

    K: int
    gap: float | None
    ci_low: float | None
    ci_high: float | None
    s_ref: float | None
    s_arm: float | None


class GapAmplification(AnalysisModel):
    """Gap(K_small) / Gap(K_default); null (with `note`) when Gap(K_default) is 0."""

    k_small: int
    k_default: int
    value: float | None
    note: str | None = None
    note_code: NoteCode | None = Field(None, exclude=True)
    """Why `value` is null, as data (`analyze`; the report words it as `note`)."""


class ChannelAmplification(AnalysisModel):
    """rate_arm / rate_ref with a 95% CI and a test (task-clustered log rate ratio,
    `rate_ratio.METHOD`; where the channel is too sparse for it, new in the arm or all of an
    arm's failures in one task, the exact sign test over tasks, `task_sign.METHOD`);
    `amplified` = an increase (ratio above 1, or more arm-only tasks where there is no ratio)
    with the multiplicity-corrected p below alpha (the family is
    `AnalysisResult.channel_family`)."""

    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    count_ratio: float | None
    count_arm: int
    count_ref: int
    rate_arm: float | None
    rate_ref: float | None
    amplified: bool
    note: str | None = None
    note_codes: tuple[NoteCode, ...] = Field((), exclude=True)
    """Why there is no ratio, interval or test, as data (`analyze`: the main reason, then
    'sign_test' or 'few_tasks'; the report words them as `note`)."""
    p_value: float | None = None
    """Two-sided, uncorrected; null where there is no test (see `note`)."""
    p_adjusted: float | None = None
    """Corrected over the family (`channel_family`); null before the study-wide step."""
    test: Literal["rate_ratio", "task_sign"] | None = None
    """Which test gave `p_value` (null: none)."""
    tasks_arm_only: int | None = None
    """The sign test's counts: paired tasks where only the arm / only the reference failed in
    the channel (null where the rate-ratio test was used)."""
    tasks_ref_only: int | None = None


class ChannelFamily(AnalysisModel):
    """Which comparisons channel amplification is corrected over, and how."""

    correction: Correction
    test: str
    alpha: float
    size: int
    members: list[str]
    """'model / domain / arm: channel' for every tested channel ratio of the study."""
    failed_calls_size: int
    """The all-channel failed-call ratios (one per comparison) form their own family."""
    note: str = (
        "every channel of CHANNELS (unknown_tool and its four parts included) of every arm "
        "against its cell's reference, where the arm failed in it and the cell has enough "
        "paired tasks: the rate-ratio test where both arms failed in it in more than one task, "
        "else (new in the arm, or all of an arm's failures in one task) the exact sign test "
        "over tasks; amplified = an increase and adjusted p < alpha"
    )
    exact_test: str = TASK_SIGN_METHOD
    """The test of channels too sparse for the ratio (`task_sign.METHOD`)."""


FloorNote = Literal["names_in_half", "no_interval", "undefined_halves"]
"""Why a floor or its comparison is missing, as data (worded by `report.floor_text`)."""

Invariance = Literal["not beyond the noise floor", "beyond the noise floor", "not decided"]


class FloorStat(AnalysisModel):
    """One diagnostic of an arm next to the reference's noise floor (docs/analysis.md, "Noise
    floor"). `kind` level (ρ, novel share): `floor` is reference half vs reference half,
    `arm_half` reference half vs the arm's other half (same size), `excess` their difference
    with a paired task-bootstrap interval, `beyond_floor` when it excludes 0. `kind`
    difference / ratio: `floor` is the mean absolute difference (ratios: exp of the mean
    |log ratio|) between halves, `floor_full_trials` that size rescaled by 1/√2 to the full
    trial count, each with its task-bootstrap standard error; no decision (`beyond_floor`
    null): the report calls the arm beyond such a floor only past it by twice its standard
    error (`beyond_full_trials`)."""

    kind: Literal["level", "difference", "ratio"]
    arm: float | None
    """The arm against the full reference, as in the comparison."""
    floor: float | None = None
    floor_full_trials: float | None = None
    floor_se: float | None = Field(None, exclude_if=lambda v: v is None)
    """Signed kinds: the task-bootstrap standard error of `floor` (on each of the cell's first
    resamples, the mean size over the splits of each difference minus the data's); for `kind`
    ratio on the natural-log scale, the standard error of log(floor), so the floor is
    uncertain by a factor of about exp(floor_se). Absent without resamples (too few paired
    tasks) or where under half the resamples define it."""
    floor_full_trials_se: float | None = Field(None, exclude_if=lambda v: v is None)
    """`floor_se` rescaled by 1/√2, as `floor_full_trials` is (ratios: log scale)."""
    arm_half: float | None = None
    excess: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    beyond_floor: bool | None = None
    note: str | None = None
    note_code: FloorNote | None = Field(None, exclude=True)
    """Why `note` is there, as data (`analyze`; the report words it)."""

    def reach_full_trials(self) -> float | None:
        """Signed kinds: where the floor at the full trial count ends with its uncertainty,
        floor_full_trials + FLOOR_SE_REACH × floor_full_trials_se (ratios: on the log scale,
        floor_full_trials × exp(FLOOR_SE_REACH × se)); None without a standard error."""
        floor, se = self.floor_full_trials, self.floor_full_trials_se
        if self.kind == "level" or floor is None or se is None:
            return None
        if self.kind == "ratio":
            return floor * math.exp(FLOOR_SE_REACH * se)
        return floor + FLOOR_SE_REACH * se

    def beyond_full_trials(self) -> bool | None:
        """Signed kinds: whether the arm lies beyond the floor with its uncertainty, |arm|
        past `reach_full_trials` (ratios: arm outside 1/reach to reach); None without a
        standard error or an arm value (no claim either way)."""
        reach, arm = self.reach_full_trials(), self.arm
        if reach is None or arm is None:
            return None
        if self.kind == "ratio":
            return None if arm <= 0 else bool(abs(math.log(arm)) > math.log(reach))
        return bool(abs(arm) > reach)


class NoiseFloor(AnalysisModel):
    """Every diagnostic of one comparison next to what the reference gives against itself;
    keys: spearman_rho, novel_fraction, failed_calls, channel.<channel>, gap.K<k> (smallest
    and default K), recovery_difference, repeat_difference, reissue_difference,
    trajectory.<metric>."""

    splits: int
    trials_per_half: list[int] = Field(default_factory=list)
    method: str
    diagnostics: dict[str, FloorStat]
    invariance: Invariance
    invariance_reason: str
    """`method` and `invariance_reason` are words: `analyze` leaves them empty, the report
    says them from the numbers (`flatscore.report.floor_text`)."""
    resamples: int | None = Field(None, exclude=True)
    """The cell's bootstrap resamples the floor's intervals used (None: too few tasks)."""
    reference_names: int | None = None
    """Distinct hallucinated names of the reference on the paired tasks: below
    `noise_floor.MIN_REFERENCE_NAMES` invariance is "not decided" (untestable)."""


class Comparison(AnalysisModel):
    """One arm against its cell's reference, paired on the tasks both ran. `compare` fills
    everything but the study-wide part (p_holm, p_bh, p_adjusted, significant, verdict),
    which `finalize` adds once every comparison of the study is known."""

    arm: str
    reference: str
    paired_tasks: int
    interval_method: str = ""
    """How the intervals were made, in words (`analyze` leaves it empty; the report says it
    from `paired_tasks` and the settings: `flatscore.report.notes_text`)."""
    gap: list[GapPoint]
    gap_default: GapPoint
    gap_amplification: GapAmplification
    gap_growth: Interval
    channel_amplification: dict[str, ChannelAmplification]
    amplified_channels: list[str]
    failed_calls: ChannelAmplification | None = None
    """All failed agent calls (every channel but malformed_output) / agent tool calls, arm
    over reference: is there more failure at all?"""
    spearman_rho: float | None
    spearman_ci_low: float | None
    spearman_ci_high: float | None
    spearman_note: str | None = None
    spearman_note_code: NoteCode | None = Field(None, exclude=True)
    hallucinated_names_union: int
    novel_fraction: float | None
    novel_names: list[str]
    success_difference: Interval
    test: str
    p_value: float | None
    p_holm: float | None = None
    p_bh: float | None = None
    p_adjusted: float | None = None
    significant: bool = False
    tost_equivalent: bool
    tost_p: float | None
    tost_margin: float
    budget_tests: list[BudgetTest] = Field(default_factory=list)
    """The success tests the verdict reads (`verdict_rule`): the default budget, then the
    tight one (`settings.tight_budget`) when it is among the budgets and below the default."""
    trajectory_difference: dict[str, Interval]
    recovery_difference: Interval
    repeat_difference: Interval | None = None
    """Loops: the arm's repeat share minus the reference's (repeated failed calls / failed
    agent calls), points as a fraction, task-bootstrap interval."""
    reissue_difference: Interval | None = None
    """Loops: the arm's re-issue share minus the reference's (calls re-issuing a call that
    already succeeded / agent tool calls)."""
    verdict: Verdict | None = None
    """Null only before the study-wide correction; always set in analysis.json."""
    verdict_reason: str = ""
    noise_floor: NoiseFloor | None = None
    """The reference against itself beside every diagnostic (null: not computed)."""
    control_of: str | None = None
    """Set when this arm is a negative control: a replicate of that arm with another seed
    base (a study file's `control_of`); it should come out "no damage detected"."""
    sequential: SequentialComparison | None = Field(None, exclude_if=lambda v: v is None)
    """What a sequential study would have decided, and after how many tasks (`analyze
    --sequential` only; absent otherwise)."""


class RiskScreen(AnalysisModel):
    """The study's cheap filter, a prior from reference-arm logs alone; `reason` ends with
    what the cell's own comparisons found (`amplified_in`)."""

    # `analyze` leaves `reason` empty; the words are the report's (`report.risk_text`).

    verdict: Literal["low risk", "at risk", "unknown"]
    established_channels: dict[str, float]
    threshold: float
    reason: str
    amplified_in: list[str] | None = None
    """The cell's arms with an amplified channel or more failed calls overall (corrected
    tests); null when the cell has no comparison."""


class Cell(AnalysisModel):
    """One (model, domain) pair: its arms, each compared with the reference arm."""

    model: str
    domain: str
    reference: str
    reference_reason: str
    """Why `reference` is the reference, in words (`analyze` records `reference_why`; the
    report says it: `flatscore.report.reference_text`)."""
    reference_why: ReferenceWhy | None = Field(None, exclude=True)
    arms: list[ArmStats]
    comparisons: list[Comparison]
    risk_screen: RiskScreen
    verdict: Verdict
    verdict_reason: str
    warnings: list[str] = Field(default_factory=list)
    notices: list[Notice] = Field(default_factory=list, exclude=True)
    """The cell's warnings as data (`analysis.notices`): the report words them after
    `warnings` (`flatscore.report.warning_text`) and empties this list."""


class ArmCost(AnalysisModel):
    """What one arm of one cell cost to run (every episode counts, infrastructure errors
    included: they were paid for). Units and methods are in `CostSummary.units` / `.how`;
    a figure that was not recorded is null."""

    model: str
    domain: str
    arm: str
    episodes: int
    successes: int
    parameters: int | None = None
    weight_bytes: int | None = None
    bits_per_parameter: float | None = None
    resident_weight_bytes: int | None = None
    peak_rss_bytes: int | None = None
    prefill_tokens_per_s: float | None = None
    decode_tokens_per_s: float | None = None
    timing_source: str | None = None
    agent_turns: int = 0
    turn_latency_p50_s: float | None = None
    turn_latency_p95_s: float | None = None
    prompt_tokens_per_episode: float | None = None
    completion_tokens_per_episode: float | None = None
    wall_s_per_episode: float | None = None
    wall_s_per_success: float | None = None
    episodes_in_flight: float | None = None
    machine_s_per_episode: float | None = None
    machine_s_per_success: float | None = None
    money_per_1k_episodes: float | None = None
    money_per_success: float | None = None
    currency: str | None = None


class CostSummary(AnalysisModel):
    """analysis.json's `cost` section: one row per (model, domain, arm), with each figure's
    unit and how it was measured, and warnings about load that make arms hard to compare."""

    # `analyze` leaves the units, how and warnings empty; the report fills them in
    # (`report.cost_notes`).

    arms: list[ArmCost]
    units: dict[str, str]
    how: dict[str, str]
    warnings: list[str] = Field(default_factory=list)
    shared_process: bool = Field(False, exclude=True)
    """Some process served several arms (their peak memory is one figure), as data."""

    def row(self, model: str, domain: str, arm: str) -> ArmCost | None:
        return next(
            (c for c in self.arms if (c.model, c.domain, c.arm) == (model, domain, arm)), None
        )


class Settings(AnalysisSettings):
    """What the numbers were computed with (the chosen `AnalysisSettings` plus what the data
    decided): rerunning with these gives the same bytes."""

    budgets: list[int]
    default_K: int
    default_K_source: str
    """Where the default K came from, in words (`analyze` leaves it empty and records
    `default_K_from`; the report says it: `flatscore.report.budget_text`)."""
    default_K_from: KSource | None = Field(None, exclude=True)
    channel_rules: str
    rules: ChannelRules | None = Field(None, exclude=True)
    """Not part of the record (`channel_rules` names them): `options_from_settings` loads them."""
    tool_list_sources: dict[str, int]
    precision_order: list[str]
    weighting: str = WEIGHTING
    success_interval: str = (
        "paired score interval on per-task success differences (empirical-likelihood variance "
        "under each hypothesised difference, t(n − 1); Tango's score interval with fewer than 6 "
        "discordant tasks), at every study size; the paired test and TOST use the same statistic"
    )


class AnalysisResult(AnalysisModel):
    """analysis.json: `cells` plus the settings and the definition text each number follows."""

    # Its words are the report's: `analyze` leaves `definitions` (and the sequential
    # reading's) empty; `flatscore.report.analysis_text.worded` fills them in from the
    # settings when the analysis is written or shown.

    schema_version: int = ANALYSIS_SCHEMA_VERSION
    flatscore_version: str
    settings: Settings
    definitions: dict[str, str]
    """The definition each number follows, in words (empty until the report words it)."""
    episodes_read: int
    infrastructure_errors: int
    cells: list[Cell]
    warnings: list[str] = Field(default_factory=list)
    notices: list[Notice] = Field(default_factory=list, exclude=True)
    """The analysis' own warnings as data (`analysis.notices`): the report words them after
    `warnings` (`flatscore.report.warning_text`) and empties this list."""
    repair: RepairEffectResult | None = None
    """Repair effect per cell and arm; present when the episodes include repair runs."""
    margins: MarginsResult | None = None
    """Logit-margin analysis (`flatscore margins`), attached with `analyze --margins`."""
    channel_family: ChannelFamily | None = None
    """The multiplicity family of channel amplification; null when nothing was tested."""
    cost: CostSummary | None = None
    """What each arm cost to run (docs/analysis.md, "Cost")."""
    sequential: SequentialSummary | None = Field(None, exclude_if=lambda v: v is None)
    """The study read sequentially: task order, design, tasks and episodes it needed
    (`analyze --sequential` only; absent otherwise)."""
