"""The analysis settings: one model for the Python API, the CLI flags (`analyze`, `report`,
`repair-effect`), study files and the `settings` block of analysis.json (which adds what the
data decided: default K, tool-list sources, precision order). Defaults come from
`flatscore.defaults`.

Every rate, gap and margin is a fraction (0.075 = 7.5 points). People write `tost_margin`
in points (the CLI's `--tost-margin`, a study file's `analysis.tost_margin`): validating
with the `POINTS` context converts it, and dumping with it converts back, so a study file
and the study.json written from it say the same. `budgets` may be written as text (`0-9`,
`0,2,5`); `channel_rules` names a rules file (relative to the context's `base_dir`, when
given) and is loaded into the `ChannelRules` it names while validating.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from pydantic import (
    AliasChoices,
    ConfigDict,
    Field,
    FieldSerializationInfo,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    field_serializer,
    field_validator,
)

from flatscore import defaults
from flatscore.analysis.budget import parse_budgets
from flatscore.analysis.channels import BUILTIN_RULES, ChannelRules, load_rules
from flatscore.analysis.outputs import AnalysisModel, CountMode
from flatscore.analysis.trials import parse_trials
from flatscore.defaults import MAX_BOOTSTRAP, MAX_BUDGET, MIN_BOOTSTRAP, Correction
from flatscore.errors import InputError, validating

BOOTSTRAP_MIN_TASKS = defaults.BOOTSTRAP_MIN_TASKS
DEFAULT_RISK_THRESHOLD = defaults.RISK_THRESHOLD

POINTS: dict[str, Any] = {"units": "points"}
"""Validation/serialization context of values people write: `tost_margin` in points."""


def in_points(fraction: float) -> float:
    """A fraction of tasks in the points people read and write (0.075 → 7.5): how every text
    states a margin, and how the settings' `tost_margin` leaves them in points."""
    return 100.0 * fraction


def _in_points(info: ValidationInfo | FieldSerializationInfo) -> bool:
    context = info.context
    return isinstance(context, dict) and context.get("units") == "points"


def _range_list(
    value: Any, parse: Callable[[str], list[int]], ok: Callable[[int], bool], message: str
) -> Any:
    """A range list (`--budgets`, `--trial-range`): its text → the list (`parse`, whose
    InputError becomes the field's error); a given list's numbers must be `ok`."""
    if isinstance(value, str):
        try:
            return parse(value)
        except InputError as exc:
            raise ValueError(exc.message) from None
    if isinstance(value, list) and any(isinstance(v, int) and not ok(v) for v in value):
        raise ValueError(message)
    return value


class Price(AnalysisModel):
    """What running an arm costs: per 1M prompt / completion tokens (an API's price list)
    and/or per machine-hour (a rented GPU), in `currency`. Any part may be left out."""

    per_1m_prompt_tokens: float | None = Field(None, ge=0, allow_inf_nan=False)
    per_1m_completion_tokens: float | None = Field(None, ge=0, allow_inf_nan=False)
    per_hour: float | None = Field(None, ge=0, allow_inf_nan=False)
    currency: str = "USD"


class AnalysisSettings(AnalysisModel):
    """What a person chooses; fractions throughout (see the module docstring for units)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    reference: str | None = None
    budgets: list[int] | None = None
    count: CountMode = defaults.COUNT
    tost_margin: float = Field(
        defaults.TOST_MARGIN, gt=0, lt=1, description="fraction, 0.075 = 7.5 points"
    )
    tight_budget: int = Field(
        defaults.TIGHT_K,
        ge=0,
        le=MAX_BUDGET,
        description="the tight error budget K the verdict also tests (below the default K)",
    )
    bootstrap: int = Field(defaults.BOOTSTRAP, ge=MIN_BOOTSTRAP, le=MAX_BOOTSTRAP)
    bootstrap_min_tasks: int = Field(defaults.BOOTSTRAP_MIN_TASKS, ge=2)
    seed: int = defaults.ANALYSIS_SEED
    correction: Correction = defaults.CORRECTION
    confidence: float = defaults.CONFIDENCE
    alpha: float = defaults.ALPHA
    risk_threshold: float = defaults.RISK_THRESHOLD
    dedupe: bool = False
    balanced: bool = Field(
        False,
        exclude_if=lambda on: not on,  # off: analysis.json as it was before this setting
        description="only the (domain, task, trial) every arm of a cell has (a study cut "
        "short; `flatscore.analysis.balanced`); recorded in analysis.json when on",
    )
    sequential: bool = Field(
        False,
        exclude_if=lambda on: not on,  # off: analysis.json as it was before this setting
        description="also decide every comparison as a sequential study would have "
        "(`flatscore.analysis.sequential_replay`); recorded in analysis.json when on",
    )
    fixed_design: bool = Field(
        False,
        exclude_if=lambda on: not on,
        description="read a sequential run's files as a fixed design (`--fixed-design`; by "
        "default a run that stopped sequentially is read sequentially); recorded when on",
    )
    from_runs: list[str] | None = Field(
        None,
        exclude_if=lambda v: not v,
        description="the settings taken from the study the run files record "
        "(`metadata.study_analysis`, `flatscore.analysis.recorded`), not given by the user",
    )
    sequential_max_tasks: int | None = Field(
        None,
        ge=1,
        exclude_if=lambda v: v is None,
        description="the sequential design's maximum paired tasks per comparison when the "
        "data stop short of it (a run still going; None: the data's paired tasks)",
    )
    trials: list[int] | None = Field(
        None,
        exclude_if=lambda v: v is None,  # all trials: analysis.json as it was before
        description="the trials analysed, counted from 1 (`1-2`: the episodes' trial 0 and "
        "1; `flatscore.analysis.trials`); none: every trial; recorded in analysis.json when set",
    )
    prices: dict[str, Price] = Field(
        default_factory=dict, description="by arm name, or 'model/arm' (the study file's)"
    )
    rules: ChannelRules | None = Field(
        None,
        validation_alias=AliasChoices("rules", "channel_rules"),
        serialization_alias="channel_rules",
        description="the channel rules (a file's path as input; None: the built-in rules)",
    )

    @field_validator("tost_margin", mode="before")
    @classmethod
    def _margin_points(cls, value: Any, info: ValidationInfo) -> Any:
        if not _in_points(info) or isinstance(value, bool) or not isinstance(value, int | float):
            return value
        if not 0 < value < 100:
            raise ValueError(f"expected a margin in (0, 100) points, got {value}")
        return value / 100.0

    @field_serializer("tost_margin", mode="wrap")  # wrap: the schema keeps the field's own
    def _margin_out(
        self, value: float, handler: SerializerFunctionWrapHandler, info: FieldSerializationInfo
    ):  # no return annotation: one would replace the field's schema (docs/analysis.schema.json)
        return round(in_points(value), 10) if _in_points(info) else handler(value)

    @property
    def margin_points(self) -> float:
        """The TOST margin in points (the settings hold the fraction)."""
        return in_points(self.tost_margin)

    def margin_text(self, spec: str = ".1f") -> str:
        """The TOST margin as the reports, cards and gate state it: `±7.5 points` (`spec`
        formats the number)."""
        return f"±{self.margin_points:{spec}} points"

    @field_validator("budgets", mode="before")
    @classmethod
    def _budget_text(cls, value: Any) -> Any:
        """`0-9` / `0,2,5` → the list; a list's values must be valid budgets."""
        message = f"budgets must be between 0 and {MAX_BUDGET}"
        return _range_list(value, parse_budgets, lambda k: 0 <= k <= MAX_BUDGET, message)

    @field_validator("trials", mode="before")
    @classmethod
    def _trial_text(cls, value: Any) -> Any:
        """`1-2` / `1,3` → the list (trials counted from 1)."""
        return _range_list(value, parse_trials, lambda t: t >= 1, "trials are counted from 1")

    @field_validator("rules", mode="before")
    @classmethod
    def _load_rules(cls, value: Any, info: ValidationInfo) -> Any:
        """A rules file's path → its loaded rules (relative to the context's `base_dir`)."""
        if not isinstance(value, str | Path):
            return value
        if str(value) == BUILTIN_RULES:
            return load_rules()
        path = Path(value).expanduser()
        base = info.context.get("base_dir") if isinstance(info.context, dict) else None
        if base is not None and not path.is_absolute():
            path = (Path(base) / path).resolve()
        try:
            return load_rules(path)
        except InputError as exc:
            raise ValueError(exc.one_line()) from None

    @field_serializer("rules")
    def _rules_out(self, value: ChannelRules | None) -> str | None:
        return None if value is None else value.source

    @classmethod
    def from_flags(cls, **values: Any) -> Self:
        """Settings from command-line flags (`tost_margin` in points; None: the default).
        A bad value is one InputError naming the setting (the command line names its flag:
        `flatscore.cli.options.settings_from_flags`)."""
        with validating(field=lambda loc: str(loc[0]) if loc else None):
            return cls.model_validate(
                {k: v for k, v in values.items() if v is not None}, context=POINTS
            )
