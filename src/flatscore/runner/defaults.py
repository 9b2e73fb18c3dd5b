"""Moved to `flatscore.defaults` (the one defaults module); this name stays as a re-export
until the branches that still import it are merged."""

from __future__ import annotations

from flatscore.defaults import (
    CONCURRENCY,
    COUNTED,
    MAX_ERRORS,
    MAX_STEPS,
    QUICK_STUDY_NAME,
    SEED,
    SPLIT,
    STUDY_NAME,
    TRIALS,
)

__all__ = [
    "CONCURRENCY",
    "COUNTED",
    "MAX_ERRORS",
    "MAX_STEPS",
    "QUICK_STUDY_NAME",
    "SEED",
    "SPLIT",
    "STUDY_NAME",
    "TRIALS",
]
