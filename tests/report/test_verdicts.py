"""Headline sentences: they restate the analysis numbers exactly and follow its verdict."""

from __future__ import annotations

from pathlib import Path

from report_episodes import analyzed, study

from flatscore.report.verdicts import ADVICE, headlines, pct, pts


def test_headline_restates_the_numbers() -> None:
    analysis = analyzed(study(tasks=45))  # enough tasks for the channel bootstrap and flatness
    cell = analysis.cells[0]
    (h,) = headlines(cell, analysis.settings)
    c = cell.comparisons[0]
    assert (h.arm, h.reference, h.verdict) == ("int4", "bf16", c.verdict)
    assert h.verdict == "flat score, amplified failures" and h.tone == "warn"
    score, failures, loops, budget, advice = h.sentences
    g = c.gap_default
    assert f"K = {analysis.settings.default_K} failed calls" in score
    assert f"{pts(g.s_arm)}% of tasks against {pts(g.s_ref)}%" in score
    assert "task-weighted" in score and "n/a" not in " ".join(h.sentences)
    assert f"gap {pts(g.gap)} points" in score
    arms = {a.arm: a for a in cell.arms}
    assert (
        f"({arms['int4'].failed_agent_calls} vs {arms['bf16'].failed_agent_calls} calls)"
        in failures
    )
    assert "role confusion" in failures  # the channel with the largest count increase
    a, r = arms["int4"], arms["bf16"]
    assert loops.startswith(f"Loops: {pct(a.repeat_share)} of its failed calls repeat")
    assert f"(against {pct(r.repeat_share)}" in loops
    assert f"{pct(a.reissue_share)} of its calls re-issue a call that already succeeded" in loops
    small = next(p for p in c.gap if c.gap_amplification.k_small == p.K)
    assert f"K = {small.K}), the gap is {pts(small.gap)} points" in budget
    assert advice == ADVICE["flat score, amplified failures"]


def test_an_arm_identical_to_the_reference_on_few_tasks_is_inconclusive() -> None:
    """6 tasks cannot show equivalence within ±7.5 points: no "no damage", no equivalence
    claim, no [0.0, 0.0] interval."""
    base = study(tasks=6, arms=("bf16",))
    copy = [e.model_copy(update={"arm": "int8"}) for e in base]
    analysis = analyzed(base + copy)
    for cell in analysis.cells:
        (h,) = headlines(cell, analysis.settings)
        assert h.verdict == "inconclusive"
        assert "could not be shown" in h.sentences[0]
        assert "0.0 to 0.0" not in h.sentences[0]
        assert "Too few tasks to test channel amplification." in h.sentences[1]
        assert h.sentences[-1] == ADVICE["inconclusive"]


def test_an_arm_identical_to_the_reference_reads_as_no_damage() -> None:
    base = study(tasks=60, arms=("bf16",))
    episodes = [e.model_copy(update={"arm": "int8"}) for e in base]
    analysis = analyzed(base + episodes)
    for cell in analysis.cells:
        (h,) = headlines(cell, analysis.settings)
        assert h.verdict == "no damage detected" and h.tone == "ok"
        assert "No channel is significantly amplified." in h.sentences[1]
        assert (
            "equivalent within ±7.5 points" in h.sentences[0]
            or "could not be shown" in h.sentences[0]
        )


def test_an_undecided_gap_gives_its_adjusted_p() -> None:
    """A big drop on a few tasks that is neither significant nor equivalent says both."""
    from flatscore.analysis.result import Comparison

    analysis = analyzed(study(tasks=3, trials=1))
    for cell in analysis.cells:
        for c in cell.comparisons:
            undecided: Comparison = c.model_copy(
                update={"significant": False, "tost_equivalent": False, "p_adjusted": 0.1875}
            )
            cell.comparisons = [undecided]
            (h,) = headlines(cell, analysis.settings)
            assert "not significant (adjusted p = 0.188) and equivalence within" in h.sentences[0]


def test_report_wording_has_no_question_marks_or_na_percent(tmp_path: Path) -> None:
    """HTML and summary.md on a study too small for bootstrap intervals: no "?", no "n/a%",
    no "[not computed, …]", and a channel new in the arm reads "new: 0 → x%"."""
    from flatscore.report import write_report

    episodes = study(tasks=6)
    analysis = analyzed(episodes)
    paths = write_report(analysis, episodes, tmp_path)
    for text in (paths.html.read_text(), paths.summary.read_text()):
        assert "n/a%" not in text and "not computed%" not in text
        assert "[not computed" not in text and "×0.00 [0.00, 0.00]" not in text
    assert "new: 0 → " in paths.summary.read_text() + paths.html.read_text()


def test_a_tiny_adjusted_p_reads_p_less_than() -> None:
    """A significant gap with p < 0.001 says `adjusted p < 0.001`, not `p = < 0.001`."""
    from flatscore.analysis.result import Comparison

    analysis = analyzed(study(tasks=3, trials=1))
    for cell in analysis.cells:
        for c in cell.comparisons:
            tiny: Comparison = c.model_copy(update={"significant": True, "p_adjusted": 2e-11})
            cell.comparisons = [tiny]
            (h,) = headlines(cell, analysis.settings)
            assert "significant after correction (adjusted p < 0.001)." in h.sentences[0]
            assert "= <" not in h.sentences[0]


def test_failures_that_moved_are_said_in_the_summary() -> None:
    """The same words as the verdict: a channel up and one down while all failed calls stay
    level (60 tasks: bad_arguments 1 → 2, entity_not_found 2 → 1 per episode on most)."""
    from analysis_builders import episode
    from flatscore.analysis.analyze import AnalysisOptions, analyze
    from flatscore.report.analysis_text import worded

    eps = []
    for t in range(60):
        ref = [("get_user", "bad_arguments"), *[("get_order", "entity_not_found")] * 2]
        arm = [*[("get_user", "bad_arguments")] * 2, ("get_order", "entity_not_found")]
        ok = [("get_user", "ok")] * (1 + t % 3)
        moved = ref if t % 5 == 0 else arm  # some tasks unchanged: a finite SE
        eps += [episode("bf16", f"t{t}", 0, ref + ok), episode("int8", f"t{t}", 0, moved + ok)]
    analysis = worded(analyze(eps, AnalysisOptions(bootstrap=200)))
    (h,) = headlines(analysis.cells[0], analysis.settings)
    failures = h.sentences[1]
    assert "All failed calls together: ×1.00" in failures and "not significantly more" in failures
    assert "Failures moved between channels: up bad_arguments ×1.80" in failures
    assert "down entity_not_found ×0.60" in failures
    reason = analysis.cells[0].comparisons[0].verdict_reason
    assert failures.split("Failures moved")[1].rstrip(".") in reason


def test_a_sequential_runs_verdict_leads_and_names_the_fixed_one() -> None:
    """In a run that stopped sequentially, the verdict to act on is the sequential one once
    it is decided or at its maximum; the fixed design's is named beside it where they
    differ; one still open leads with "inconclusive" (as the gate reads it). The replay of a
    fixed-design run leaves the fixed design's verdict in the lead."""
    from flatscore.analysis.sequential_result import SequentialComparison
    from flatscore.report.markdown import render_summary
    from flatscore.report.verdicts import SEQUENTIAL_OPEN, SEQUENTIAL_UNBOUNDED

    base = study(tasks=60, arms=("bf16",))
    analysis = analyzed(base + [e.model_copy(update={"arm": "int8"}) for e in base])
    cell = analysis.cells[0]
    (c,) = cell.comparisons
    assert c.verdict == "no damage detected" and c.tost_equivalent

    def read_as(**sequential: object) -> tuple[object, object]:
        seq = SequentialComparison.model_validate(
            {"tasks_available": 60, "episodes": 240, "ran_sequentially": True, **sequential}
        )
        new_cell = cell.model_copy(
            update={"comparisons": [c.model_copy(update={"sequential": seq})]}
        )
        (h,) = headlines(new_cell, analysis.settings)
        return h, analysis.model_copy(update={"cells": [new_cell]})

    h, result = read_as(verdict="inconclusive", decided=False, tasks=60)
    assert (h.verdict, h.tone, h.fixed_verdict) == ("inconclusive", "warn", "no damage detected")
    assert h.sentences[-1] == SEQUENTIAL_UNBOUNDED
    summary = render_summary(result)
    assert "- **int8 vs bf16: inconclusive.** (fixed design on the same tasks: no damage" in (
        summary
    )

    h, _ = read_as(verdict="inconclusive", decided=False, tasks=36, more_tasks=24)
    assert (h.verdict, h.fixed_verdict) == ("inconclusive", "no damage detected")  # open
    assert h.sentences[-1] == SEQUENTIAL_OPEN.format(tasks=36, more=24)
    h, _ = read_as(verdict="inconclusive", decided=False, tasks=60, ran_sequentially=False)
    assert (h.verdict, h.fixed_verdict) == ("no damage detected", "")  # a replay: what-if only

    h, result = read_as(verdict="no damage detected", decided=True, tasks=48)
    assert (h.verdict, h.tone, h.fixed_verdict) == ("no damage detected", "ok", "")
    assert "fixed design on the same tasks" not in render_summary(result)
