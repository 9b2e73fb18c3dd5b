"""The first screen's lines from committed analyses: study v3 (run sequentially) says where
each comparison was decided and what stopping saved, study v2 (a fixed design) the tasks each
verdict read; the same v3 read as a replay keeps the fixed design's verdicts in the lead and
names the replay's decision beside them."""

from __future__ import annotations

from pathlib import Path

import pytest

from flatscore.analysis.result import AnalysisResult
from flatscore.report.first_screen import decision_point, first_screen
from flatscore.report.sequential_text import decided_text
from flatscore.report.verdicts import lead_verdict

STUDIES = Path(__file__).resolve().parents[2] / "studies"


def _committed(study: str) -> AnalysisResult:
    path = STUDIES / study / "analysis.json"
    return AnalysisResult.model_validate_json(path.read_text("utf-8"))


@pytest.fixture(scope="module")
def v3() -> AnalysisResult:
    return _committed("embedded-study-v3")


def _lines(analysis: AnalysisResult) -> dict[tuple[str, str], tuple[str, str, str]]:
    screen = first_screen(analysis)
    return {
        (cell.key.split(" · ")[1], a.arm): (a.verdict, a.fixed_note, a.decision)
        for cell in screen.cells
        for a in cell.arms
    }


def test_a_sequential_run_says_where_each_verdict_was_decided(v3: AnalysisResult) -> None:
    lines = _lines(v3)
    assert len(lines) == 12
    # docs/embedded-study-v3.md: both INT4 forms decided at the first look, the 8-bit arms
    # at the maximum, retail's control at 96 tasks, retail's int8 open where the run stopped
    # it (102 tasks: a leaning channel holds its amplified stop)
    assert lines[("retail", "int4")] == (
        "visible damage",
        "",
        "decided after 30 of 114 paired tasks",
    )
    assert lines[("telecom", "int8")] == (
        "no damage detected",
        "",
        "decided at the design's maximum, 114 paired tasks",
    )
    assert lines[("retail", "ref-control")][2] == "decided after 96 of 114 paired tasks"
    verdict, note, decision = lines[("retail", "int8")]
    assert (verdict, note) == (
        "inconclusive",  # open: its planned looks go on, as the gate reads it
        "fixed design on the same tasks: flat score, amplified failures",
    )
    assert decision == "open after 102 tasks: the planned looks allow 12 more"
    for cell in v3.cells:
        for c in cell.comparisons:
            assert lines[(cell.domain, c.arm)][0] == lead_verdict(c)[0]
    assert first_screen(v3).saving == (
        "Run sequentially: 2,400 episodes against the fixed design's 3,192 (25% saved); read "
        "with these rules it would have stopped after 2,376 (26% saved; 960 of 1,368 paired "
        "tasks)."
    )


def test_a_fixed_design_names_the_tasks_it_read() -> None:
    v2 = _committed("embedded-study-v2")
    screen = first_screen(v2)
    assert screen.saving is None
    lines = _lines(v2)
    assert len(lines) == 12
    assert {d for _, _, d in lines.values()} == {"114 paired tasks read"}
    assert {v for v, note, _ in lines.values() if not note} >= {
        "visible damage",
        "no damage detected",
        "flat score, amplified failures",
    }


def test_a_replay_keeps_the_fixed_verdict_and_names_its_own(v3: AnalysisResult) -> None:
    replay = v3.model_copy(deep=True)
    for cell in replay.cells:
        for c in cell.comparisons:
            assert c.sequential is not None
            c.sequential = c.sequential.model_copy(update={"ran_sequentially": False})
    lines = _lines(replay)
    for cell in replay.cells:
        for c in cell.comparisons:
            assert c.sequential is not None
            verdict, note, decision = lines[(cell.domain, c.arm)]
            assert (verdict, note) == (c.verdict, "")
            assert decision == (
                f"{c.paired_tasks} paired tasks read; sequential replay: "
                + decided_text(c.sequential)
            )
    assert first_screen(replay).saving == (
        "Read sequentially, this study would have stopped after 2,376 of its 3,192 episodes "
        "(26% saved; 960 of 1,368 paired tasks)."
    )


def test_undecided_at_the_maximum_says_so(v3: AnalysisResult) -> None:
    c = next(c for c in v3.cells[1].comparisons if c.arm == "int8").model_copy(deep=True)
    assert c.sequential is not None
    c.sequential = c.sequential.model_copy(update={"decided": False, "verdict": "inconclusive"})
    assert decision_point(c) == "undecided at the design's maximum, 114 paired tasks"
    assert lead_verdict(c) == ("inconclusive", "no damage detected")  # beside the fixed one
