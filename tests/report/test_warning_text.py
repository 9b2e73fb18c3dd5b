"""The analysis' own warnings in words (`report.warning_text`): reading, `analyze`, each cell
and the repair effect keep them as notices; `worded` says them after the warnings reading put
first (each cell's in the cell, the repair effect's in it), `worded_repair` for `flatscore
repair-effect`, and the gate where the analysis gave them. Each kind's words are pinned
here as they were when the analysis built them."""

from __future__ import annotations

from typing import get_args

import pytest

from analysis_builders import episode
from flatscore.analysis.analyze import analyze
from flatscore.analysis.notices import Notice, NoticeKind
from flatscore.analysis.repair_effect import repair_effects
from flatscore.analysis.settings import AnalysisSettings
from flatscore.formats.pipeline import analyze_labelled
from flatscore.report.analysis_text import worded
from flatscore.report.warning_text import warning, worded_repair

WORDS = [
    (
        Notice(kind="attempts_superseded", count=2),
        "2 infrastructure-error attempt(s) superseded by a later attempt of the same episode "
        "(rerun by --resume): the latest attempt is used",
    ),
    (
        Notice(kind="duplicates_left_out", count=8, places=("runs/a.jsonl", "runs/a.jsonl again")),
        "--dedupe: 8 duplicate episode(s) left out (first: runs/a.jsonl and runs/a.jsonl again)",
    ),
    (
        Notice(kind="settings_differ", setting="budgets", values=([0, 1], [0, 2, 5])),
        "the run files record different study settings for budgets ([0, 1], [0, 2, 5]): none "
        "used; give it as an option",
    ),
    (
        Notice(kind="settings_differ", setting="tost_margin", values=(5.0, 7.5)),
        "the run files record different study settings for tost_margin (5.0, 7.5): none used; "
        "give it as an option",
    ),
    (
        Notice(kind="trials_left_out", count=42, total=3234, trials=(1, 2, 4)),
        "--trial-range 1-2,4: 42 of 3234 episodes of other trials left out",
    ),
    (
        Notice(kind="balanced_left_out", count=2, total=10),
        "--balanced: 2 of 10 episodes left out (a (domain, task, trial) that some arm of "
        "its cell lacks)",
    ),
    (
        Notice(kind="tau2_inferred_errors", count=3),
        "3 τ² tool result(s) had no error flag and were counted as failed because their "
        "text starts with 'Error:' (τ²'s convention)",
    ),
    (
        Notice(kind="tau2_trial_from_order", count=5),
        "5 τ² simulation(s) had no trial number: numbered per task in file order",
    ),
    (
        Notice(kind="mixed_budgets", budget=6),
        "episodes ran under different error budgets; default K uses the smallest (max_errors = 6)",
    ),
    (
        Notice(kind="not_recomputable", budget=10),
        "S(K) for K ≥ 10 is not recomputable: episodes stopped at max_errors = 10 (values "
        "there are lower bounds, marked recomputable: false)",
    ),
    (
        Notice(kind="agent_count_understated"),
        "--count agent on episodes cut by a budget that counted user errors too: S(K) may "
        "be understated for those episodes",
    ),
    (
        Notice(kind="reference_not_in_cell", arm="bf16"),
        "reference 'bf16' not in this cell; deciding from the arm names",
    ),
    (
        Notice(kind="paired_per_arm"),
        "a sequential run: each comparison is paired on the tasks its arm and the reference "
        "both ran (arms stopped at different looks)",
    ),
    (
        Notice(kind="tasks_left_out", count=3),
        "3 task(s) not run by every arm are left out of the paired comparisons (arm tables "
        "use all of an arm's tasks)",
    ),
    (
        Notice(kind="reference_unusable", arm="bf16"),
        "reference 'bf16' has no usable episodes: no comparison",
    ),
    (Notice(kind="no_common_task"), "no task was run by every arm: no paired comparison"),
    (
        Notice(kind="repair_unmatched", model="qwen", domain="retail"),
        "qwen/retail: repair runs without a matching plain run",
    ),
    (
        Notice(kind="repair_tasks_left_out", count=2),
        "2 task(s) not run by every arm with and without repair are left out",
    ),
    (Notice(kind="repair_no_common_task"), "no task was run by every group: no comparison"),
    (
        Notice(kind="repair_few_tasks", count=4, minimum=10),
        "4 paired task(s): too few for bootstrap intervals of the channel-rate effects "
        "(needs ≥ 10)",
    ),
]


@pytest.mark.parametrize(("notice", "words"), WORDS)
def test_each_notice_in_words(notice: Notice, words: str) -> None:
    assert warning(notice) == words


def test_every_kind_has_its_words_pinned() -> None:
    assert {n.kind for n, _ in WORDS} == set(get_args(NoticeKind))


def test_worded_puts_the_notices_after_the_warnings_given_first() -> None:
    eps = [
        episode(arm, f"t{t}", trial) for arm in ("ref", "q") for t in range(3) for trial in (0, 1)
    ]
    analysis = analyze(eps, AnalysisSettings(bootstrap=100, trials=[1], budgets=[0, 12]))
    assert analysis.warnings == []
    assert [n.kind for n in analysis.notices] == ["trials_left_out", "not_recomputable"]
    analysis.warnings[:0] = ["read first"]  # as reading does (what it left out)
    words = worded(analysis)
    assert words.warnings == [
        "read first",
        "--trial-range 1: 6 of 12 episodes of other trials left out",
        warning(analysis.notices[1]),
    ]
    assert words.notices == [] and worded(words) is words


def test_a_cells_notices_are_worded_into_its_warnings() -> None:
    """A task only the reference ran: the cell keeps it as data, analysis.json says it."""
    eps = [episode(arm, f"t{t}") for arm in ("ref", "q") for t in range(4)] + [episode("ref", "t9")]
    analysis = analyze(eps, AnalysisSettings(reference="ref", bootstrap=100))
    (cell,) = analysis.cells
    assert cell.warnings == [] and cell.notices == [Notice(kind="tasks_left_out", count=1)]
    assert "notices" not in cell.model_dump()
    (said,) = worded(analysis).cells
    assert said.notices == [] and said.warnings == [
        "1 task(s) not run by every arm are left out of the paired comparisons (arm tables "
        "use all of an arm's tasks)"
    ]


def test_the_repair_effects_notices_are_worded() -> None:
    """Repair runs on fewer tasks than their plain twin, and a model with repair runs only."""
    eps = [episode("bf16", f"t{t}") for t in range(4)]
    eps += [episode("bf16+repair", f"t{t}") for t in range(3)]
    eps += [episode("bf16+repair", "t0", model="other")]
    result = repair_effects(eps, AnalysisSettings(bootstrap=100, bootstrap_min_tasks=10))
    assert result.warnings == [] and [n.kind for n in result.notices] == ["repair_unmatched"]
    assert [n.kind for n in result.cells[0].notices] == [
        "repair_tasks_left_out",
        "repair_few_tasks",
    ]
    said = worded_repair(result)
    assert said.warnings == ["other/retail: repair runs without a matching plain run"]
    assert said.cells[0].warnings == [
        "1 task(s) not run by every arm with and without repair are left out",
        "3 paired task(s): too few for bootstrap intervals of the channel-rate effects "
        "(needs ≥ 10)",
    ]
    assert said.notices == [] and said.cells[0].notices == [] and worded_repair(said) is said


def test_what_reading_found_comes_first_then_the_analysis_own() -> None:
    """A duplicate dropped, then a setting the run files record differently, then the
    analysis' own: the order analysis.json's warnings have had since reading said them."""
    eps = [
        episode(arm, f"t{t}").model_copy(
            update={"metadata": {"study_analysis": {"tost_margin": 5.0 if arm == "ref" else 7.5}}}
        )
        for arm in ("ref", "q")
        for t in range(3)
    ]
    labelled = [("a.jsonl", ep) for ep in eps] + [("b.jsonl", eps[0])]
    settings = AnalysisSettings(bootstrap=100, dedupe=True, budgets=[0, 12])
    analysed = analyze_labelled(labelled, settings)
    assert analysed.result.warnings == []
    assert worded(analysed.result).warnings == [
        "--dedupe: 1 duplicate episode(s) left out (first: a.jsonl and b.jsonl)",
        "the run files record different study settings for tost_margin (5.0, 7.5): none used; "
        "give it as an option",
        warning(Notice(kind="not_recomputable", budget=10)),
    ]
