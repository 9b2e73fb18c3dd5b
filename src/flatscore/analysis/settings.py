"""The analysis settings: one model for the Python API, the CLI flags, study files and the
`settings` block of analysis.json (which adds what the data decided: default K, tool-list
sources, precision order). Every rate, gap and margin is a fraction (0.075 = 7.5 points);
only the CLI's and the study file's `tost_margin` are written in points, and are converted
by `AnalysisSettings.from_points`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from flatscore.analysis.outputs import AnalysisModel, CountMode
from flatscore.limits import MAX_BOOTSTRAP, MIN_BOOTSTRAP

Correction = Literal["holm", "bh"]
DEFAULT_RISK_THRESHOLD = 0.02
BOOTSTRAP_MIN_TASKS = 30
"""Below this many paired tasks a percentile task bootstrap does not keep its coverage (it
collapses to [0, 0] without discordant tasks); such intervals are left out (null, with a
note) and success differences use the paired interval (paired_score), which holds at every
size."""


class Price(AnalysisModel):
    """What running an arm costs: per 1M prompt / completion tokens (an API's price list)
    and/or per machine-hour (a rented GPU), in `currency`. Any part may be left out."""

    per_1m_prompt_tokens: float | None = Field(None, ge=0, allow_inf_nan=False)
    per_1m_completion_tokens: float | None = Field(None, ge=0, allow_inf_nan=False)
    per_hour: float | None = Field(None, ge=0, allow_inf_nan=False)
    currency: str = "USD"


class AnalysisSettings(AnalysisModel):
    """What a person chooses; fractions throughout."""

    reference: str | None = None
    budgets: list[int] | None = None
    count: CountMode = "all"
    tost_margin: float = Field(0.075, gt=0, lt=1, description="fraction, 0.075 = 7.5 points")
    bootstrap: int = Field(5000, ge=MIN_BOOTSTRAP, le=MAX_BOOTSTRAP)
    bootstrap_min_tasks: int = Field(BOOTSTRAP_MIN_TASKS, ge=2)
    seed: int = 0
    correction: Correction = "holm"
    confidence: float = 0.95
    alpha: float = 0.05
    risk_threshold: float = DEFAULT_RISK_THRESHOLD
    dedupe: bool = False
    prices: dict[str, Price] = Field(
        default_factory=dict, description="by arm name, or 'model/arm' (the study file's)"
    )

    @classmethod
    def from_points(cls, **values: Any) -> AnalysisSettings:
        """Settings from user-facing values, where `tost_margin` is in points."""
        if values.get("tost_margin") is not None:
            values["tost_margin"] = values["tost_margin"] / 100.0
        return cls(**{k: v for k, v in values.items() if v is not None})
