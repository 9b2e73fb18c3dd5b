"""summary.md: verdicts and numbers in Markdown; model-made names cannot become markup."""

from __future__ import annotations

from report_episodes import analyzed, hostile_study

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
