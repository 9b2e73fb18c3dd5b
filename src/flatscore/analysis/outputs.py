"""Base pieces shared by the analysis output models (`result.py`, `repair_effect.py`):
kept apart so that `result.py` can include the repair-effect models without an import cycle."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from flatscore.defaults import JSON_DIGITS, CountMode

__all__ = ["AnalysisModel", "CountMode", "Interval", "NoteCode", "rounded_json"]

_ANY: TypeAdapter[Any] = TypeAdapter(Any)


class AnalysisModel(BaseModel):
    """Every analysis output model: unknown fields are an error, not silently dropped."""

    model_config = ConfigDict(extra="forbid")


NoteCode = Literal[
    "few_tasks",
    "undefined",
    "no_failed_calls",
    "no_agent_calls",
    "new_in_arm",
    "no_failures",
    "no_calls",
    "no_spread",
    "unbounded",
    "never_failed",
    "sign_test",
    "no_positive_gap",
    "gap_is_noise",
    "too_few_names",
    "equal_counts",
]
"""Why a number or a bound is missing, as data: the analysis sets a code beside each `note`
and leaves the note empty; the words are the report's (`flatscore.report.notes_text`)."""


class Interval(AnalysisModel):
    """A point estimate with its bootstrap percentile interval (`note` says why a value or a
    bound is missing)."""

    # `analyze` sets `note_code` and leaves `note` empty; the report words it.

    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    note: str | None = None
    note_code: NoteCode | None = Field(None, exclude=True)


def _rounded(value: Any, digits: int) -> Any:
    if isinstance(value, float) and value == 0.0:
        return 0.0  # never -0.0
    if isinstance(value, float) and math.isfinite(value) and value != 0.0:
        return float(f"{value:.{digits}g}")
    if isinstance(value, dict):
        return {k: _rounded(v, digits) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v, digits) for v in value]
    return value


def rounded_json(model: BaseModel, digits: int = JSON_DIGITS) -> str:
    """The model's JSON (pydantic's field order and number format, two-space indent) with
    every float to `digits` significant digits. Why: the last bits of a float depend on the
    CPU's vector code paths (numpy's exp and log, BLAS sums), so full-precision files would
    rebuild byte for byte only on the CPU that wrote them; 10 digits are far more than any
    statistic here carries, and a rebuild differs only where a value lies within a few ulps
    of a rounding boundary."""
    data = _rounded(model.model_dump(mode="json"), digits)
    return _ANY.dump_json(data, indent=2).decode("utf-8")
