"""Base pieces shared by the analysis output models (`result.py`, `repair_effect.py`):
kept apart so that `result.py` can include the repair-effect models without an import cycle."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from flatscore.defaults import CountMode

__all__ = ["AnalysisModel", "CountMode", "Interval"]


class AnalysisModel(BaseModel):
    """Every analysis output model: unknown fields are an error, not silently dropped."""

    model_config = ConfigDict(extra="forbid")


class Interval(AnalysisModel):
    """A point estimate with its bootstrap percentile interval (`note` says why a value or a
    bound is missing)."""

    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    note: str | None = None
