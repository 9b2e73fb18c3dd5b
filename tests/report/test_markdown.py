"""summary.md: verdicts and numbers in Markdown; model-made names cannot become markup."""

from __future__ import annotations

import math

from report_episodes import analyzed, hostile_study, study

from flatscore.analysis.result import FloorStat
from flatscore.episode import Episode
from flatscore.report import ReportPaths
from flatscore.report.markdown import md_escape, render_summary


def test_md_escape_known_answers() -> None:
    assert md_escape("get_user") == "get\\_user"
    assert md_escape("<script>x</script>") == "&lt;script>x&lt;/script>"  # no `<`: no tag
    assert md_escape("[click](javascript:x)") == "\\[click\\](javascript:x)"
    assert md_escape("a|b `c`\n*d*") == "a\\|b \\`c\\` \\*d\\*"


def test_summary_has_a_verdict_per_cell_and_the_numbers(
    study_report: ReportPaths, study_episodes: list[Episode]
) -> None:
    text = study_report.summary.read_text("utf-8")
    analysis = analyzed(study_episodes)
    for cell in analysis.cells:
        assert f"· {cell.domain}: **{cell.verdict}**" in text
        for c in cell.comparisons:
            g = c.gap_default
            assert f"{100 * g.gap:.1f} [{100 * g.ci_low:.1f}, {100 * g.ci_high:.1f}]" in text
    assert text.endswith("\n") and "generated" not in text


def test_summary_of_hostile_logs_has_no_raw_markup() -> None:
    episodes = hostile_study()
    text = render_summary(analyzed(episodes))
    assert "<" not in text


def test_floor_table_gives_each_signed_floor_its_standard_error() -> None:
    """The noise-floor table: the arm, ± its floor at the full trial count and the floor's
    standard error (ratios: as a factor), * only past the floor plus 2 standard errors."""
    analysis = analyzed(study(tasks=30))
    cell = analysis.cells[0]
    c = cell.comparisons[0]
    assert c.noise_floor is not None
    k = min(p.K for p in c.gap)
    planted = {
        "recovery_difference": FloorStat(
            kind="difference", arm=0.05, floor_full_trials=0.02, floor_full_trials_se=0.01
        ),
        f"gap.K{k}": FloorStat(
            kind="difference", arm=0.035, floor_full_trials=0.02, floor_full_trials_se=0.01
        ),
        "failed_calls": FloorStat(
            kind="ratio", arm=1.3, floor_full_trials=1.1, floor_full_trials_se=math.log(1.05)
        ),
    }
    floor = c.noise_floor.model_copy(
        update={"diagnostics": {**c.noise_floor.diagnostics, **planted}}
    )
    cell = cell.model_copy(update={"comparisons": [c.model_copy(update={"noise_floor": floor})]})
    text = render_summary(analysis.model_copy(update={"cells": [cell]}))
    row = next(
        line for line in text.splitlines() if line.startswith(f"| {c.arm} vs ") and "±" in line
    )
    assert "| 5.0 (±2.0, SE 1.0) * |" in row  # 5.0 > 2.0 + 2 × 1.0
    assert "| 3.5 (±2.0, SE 1.0) |" in row  # past the floor, not past its uncertainty
    assert "| ×1.30 (×1.10, SE ×1.05) * |" in row  # ×1.3 > ×1.1 · 1.05²
    assert "* where the arm exceeds that floor by more than 2 standard errors" in text
