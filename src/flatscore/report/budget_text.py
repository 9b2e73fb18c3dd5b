"""Where the default error budget K came from, in words (docs/analysis.md, "Budgets"): the
analysis records which source decided it (`analysis.budget.default_budget`); analysis.json's
`settings.default_K_source` is these words (`analysis_text.worded`)."""

from __future__ import annotations

from flatscore.analysis.budget import KSource
from flatscore.analysis.result import Settings


def k_source(source: KSource, k: int) -> str:
    """'recorded max_errors = 10 → K = 9' and the like."""
    if source == "recorded":
        return f"recorded max_errors = {k + 1} → K = {k}"
    if source == "unlimited":
        return (
            f"recorded max_errors = 0 (τ²: no limit) → K = {k}, the episodes' own largest "
            "failed-call count"
        )
    return f"no recorded budget: τ²'s default K = {k}"


def worded_settings(settings: Settings) -> Settings:
    """`settings` with `default_K_source` in words (itself when it has them)."""
    if settings.default_K_source or settings.default_K_from is None:
        return settings
    words = k_source(settings.default_K_from, settings.default_K)
    return settings.model_copy(update={"default_K_source": words})
