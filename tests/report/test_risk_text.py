"""The risk screen in words (`report.risk_text`): the prior from the reference arm's rates,
then what the cell's comparisons found, from the screen's data alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis_builders import episode
from flatscore.analysis.analyze import analyze
from flatscore.analysis.result import AnalysisResult, RiskScreen
from flatscore.analysis.settings import AnalysisSettings
from flatscore.report.analysis_text import worded
from flatscore.report.risk_text import prior, risk_reason

ROOT = Path(__file__).parents[2]


def test_the_prior_names_the_established_channels_with_their_rates() -> None:
    screen = RiskScreen(
        verdict="at risk",
        established_channels={"bad_arguments": 0.104, "precondition": 0.1772},
        threshold=0.02,
        reason="",
    )
    assert prior(screen, "ref") == (
        "a prior from ref alone: established failure channel(s) bad_arguments 10.4%, "
        "precondition 17.7% (≥ 2.0% of agent calls), which quantization tends to amplify"
    )
    low = RiskScreen(verdict="low risk", established_channels={}, threshold=0.05, reason="")
    assert prior(low, "bf16") == (
        "a prior from bf16 alone: every channel rate is below 5.0% of agent calls"
    )
    none = RiskScreen(verdict="unknown", established_channels={}, threshold=0.02, reason="")
    assert prior(none, "ref") == "the reference arm made no agent tool calls"


@pytest.mark.parametrize("study", ["embedded-study", "embedded-study-v2", "embedded-gemma"])
def test_the_words_from_a_published_analysis_data_are_its_own(study: str) -> None:
    """Each committed analysis.json's screen, its reason emptied, is worded back to the
    reason it was published with (the amplified arms and channels from its comparisons)."""
    path = ROOT / "studies" / study / "analysis.json"
    analysis = AnalysisResult.model_validate_json(path.read_text(encoding="utf-8"))
    for cell in analysis.cells:
        blank = cell.model_copy(
            update={"risk_screen": cell.risk_screen.model_copy(update={"reason": ""})}
        )
        assert risk_reason(blank) == cell.risk_screen.reason


def test_analyze_leaves_the_reason_empty_and_worded_says_the_outcome() -> None:
    ok, fail = ("get_user", "ok"), ("get_user", "fail")
    episodes = [
        episode(arm, f"t{t}", 0, [fail, fail, ok] if arm == "q" else [ok])
        for arm in ("ref", "q")
        for t in range(8)
    ]
    analysis = analyze(episodes, AnalysisSettings(bootstrap=100))
    (cell,) = analysis.cells
    assert cell.risk_screen.reason == ""
    assert cell.risk_screen.verdict == "low risk" and cell.risk_screen.amplified_in is not None
    (words,) = worded(analysis).cells
    amplified = "; ".join(
        f"{c.arm} (all failed calls, {', '.join(c.amplified_channels)})"
        if c.amplified_channels
        else f"{c.arm} (all failed calls)"
        for c in cell.comparisons
        if c.arm in cell.risk_screen.amplified_in
    )
    expected = "a prior from ref alone: every channel rate is below 2.0% of agent calls; "
    expected += (
        f"this cell's comparisons: amplified in {amplified}"
        if amplified
        else "this cell's comparisons show no amplified channel"
    )
    assert words.risk_screen.reason == expected
