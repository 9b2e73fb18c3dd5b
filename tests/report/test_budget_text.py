"""Where the default K came from, in words (`report.budget_text`): `analyze` records the
source, `worded` says it in `settings.default_K_source`."""

from __future__ import annotations

from analysis_builders import episode
from flatscore.analysis.analyze import analyze
from flatscore.analysis.settings import AnalysisSettings
from flatscore.report.analysis_text import worded
from flatscore.report.budget_text import k_source


def test_each_source_in_words() -> None:
    assert k_source("recorded", 5) == "recorded max_errors = 6 → K = 5"
    assert k_source("unlimited", 3) == (
        "recorded max_errors = 0 (τ²: no limit) → K = 3, the episodes' own largest failed-call "
        "count"
    )
    assert k_source("default", 9) == "no recorded budget: τ²'s default K = 9"


def test_analyze_records_the_source_and_worded_says_it() -> None:
    eps = [episode(arm, f"t{t}", 0, max_errors=4) for arm in ("ref", "q") for t in range(3)]
    analysis = analyze(eps, AnalysisSettings(bootstrap=100))
    assert analysis.settings.default_K_source == ""
    assert (analysis.settings.default_K, analysis.settings.default_K_from) == (3, "recorded")
    settings = worded(analysis).settings
    assert settings.default_K_source == "recorded max_errors = 4 → K = 3"
    assert "default_K_source" in settings.model_dump()
    assert "default_K_from" not in settings.model_dump()
