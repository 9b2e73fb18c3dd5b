"""The analysis' words are the report's: `analyze` leaves the definitions, the verdicts'
reasons and the sequential reading's task order and design empty, `worded` fills them in
from the settings and the numbers, and analysis.json read back keeps its own."""

from __future__ import annotations

import json

from analysis_builders import episode
from flatscore.analysis.analyze import analyze
from flatscore.analysis.result import AnalysisResult
from flatscore.analysis.settings import AnalysisSettings
from flatscore.report import analysis_json
from flatscore.report.analysis_text import worded
from flatscore.report.definitions import definitions
from flatscore.report.verdict_reason import reason

OK, FAIL = ("get_user", "ok"), ("get_user", "fail")


def _analysis(seed: int = 3, margin: float = 0.075) -> AnalysisResult:
    """Eight retail tasks, the arm failing a call on every other one (not a sequential run)."""
    episodes = [
        episode(arm, f"t{t}", 0, [FAIL, OK] if arm == "q" and t % 2 else [OK])
        for arm in ("ref", "q")
        for t in range(8)
    ]
    settings = AnalysisSettings(bootstrap=100, sequential=True, seed=seed, tost_margin=margin)
    return analyze(episodes, settings)


def test_analyze_leaves_the_words_empty_and_worded_fills_them_in() -> None:
    analysis = _analysis()
    assert analysis.definitions == {}
    assert analysis.sequential is not None and analysis.sequential.ordered_by == "seeded"
    assert (analysis.sequential.order, analysis.sequential.design) == ("", "")
    words = worded(analysis)
    assert words.definitions == definitions(analysis.settings)
    assert words.definitions["default_K"].startswith(f"K = {analysis.settings.default_K}: ")
    assert words.sequential is not None
    assert words.sequential.order.startswith("tasks in a seeded random order per cell (seed 3 ")
    assert words.sequential.design.startswith("looks every ")
    assert "a drop beyond ±7.5 points ruled out" in words.sequential.design
    assert worded(words) is words  # nothing left to fill in


def test_worded_gives_each_comparison_and_cell_its_reason() -> None:
    analysis = _analysis()
    (cell,) = analysis.cells
    (c,) = cell.comparisons
    assert (cell.verdict_reason, c.verdict_reason) == ("", "")
    (cell,) = worded(analysis).cells
    (c,) = cell.comparisons
    assert c.verdict_reason == reason(c, analysis.settings)
    assert c.verdict_reason.startswith("success difference at K = ")
    assert cell.verdict_reason == f"q vs ref: {c.verdict_reason}"
    alone = analyze([episode("ref", f"t{t}", 0, [OK]) for t in range(4)], AnalysisSettings())
    assert worded(alone).cells[0].verdict_reason == "only one arm: no comparison was made"


def test_the_words_follow_the_settings() -> None:
    words = worded(_analysis(seed=5, margin=0.05))
    assert words.definitions["tost"].startswith("TOST equivalence within ±0.05 (fraction)")
    assert words.sequential is not None and "(seed 5 " in words.sequential.order
    assert "a drop beyond ±5 points ruled out" in words.sequential.design


def test_analysis_json_carries_the_words_and_reads_back_to_the_same_bytes() -> None:
    text = analysis_json(_analysis())
    data = json.loads(text)
    assert data["definitions"]["tost"].startswith("TOST equivalence within ±0.075")
    assert data["sequential"]["order"].startswith("tasks in a seeded random order")
    assert "ordered_by" not in data["sequential"]
    back = AnalysisResult.model_validate_json(text)
    assert back.sequential is not None and back.sequential.ordered_by is None
    assert analysis_json(back) == text
