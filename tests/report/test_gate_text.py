"""The gate's error for a cell with no paired comparison of the candidate
(`report.gate_text.no_comparison`): the analysis raises it with the cell's warnings as codes
(`analysis.gate.NoComparison`), the command says them in words, as the analysis did when it
built them."""

from __future__ import annotations

import pytest

from analysis_builders import episode
from flatscore.analysis.analyze import analyze
from flatscore.analysis.gate import NoComparison, candidate_comparison
from flatscore.analysis.settings import AnalysisSettings
from flatscore.report.gate_text import no_comparison


def test_a_cell_with_no_common_task_is_refused_with_its_warnings_in_words() -> None:
    eps = [episode("bf16", f"t{t}") for t in range(4)] + [
        episode("int8", f"u{t}") for t in range(4)
    ]
    (cell,) = analyze(eps, AnalysisSettings(reference="bf16", bootstrap=100)).cells
    with pytest.raises(NoComparison) as refused:
        candidate_comparison(cell, "int8", "bf16")
    head = "field 'candidate': m / retail: no paired comparison of 'int8' with 'bf16'"
    assert refused.value.one_line() == f"{head} (tasks_left_out; no_common_task)"
    assert no_comparison(refused.value).one_line() == (
        f"{head} (8 task(s) not run by every arm are left out of the paired comparisons (arm "
        "tables use all of an arm's tasks); no task was run by every arm: no paired comparison)"
    )


def test_a_cell_without_warnings_says_no_common_task() -> None:
    """The candidate did not run in the cell at all: nothing to quote."""
    eps = [episode("bf16", f"t{t}") for t in range(4)] + [episode("fp8", f"t{t}") for t in range(4)]
    (cell,) = analyze(eps, AnalysisSettings(reference="bf16", bootstrap=100)).cells
    with pytest.raises(NoComparison) as refused:
        candidate_comparison(cell, "int8", "bf16")
    assert no_comparison(refused.value).message == (
        "m / retail: no paired comparison of 'int8' with 'bf16' (no common task)"
    )
