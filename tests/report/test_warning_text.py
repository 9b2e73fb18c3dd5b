"""The analysis' own warnings in words (`report.warning_text`): `analyze` keeps them as
notices; `worded` says them after the warnings reading put first, and the gate where the
analysis gave them."""

from __future__ import annotations

import pytest

from analysis_builders import episode
from flatscore.analysis.analyze import analyze
from flatscore.analysis.notices import Notice
from flatscore.analysis.settings import AnalysisSettings
from flatscore.report.analysis_text import worded
from flatscore.report.warning_text import warning


@pytest.mark.parametrize(
    ("notice", "words"),
    [
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
            "episodes ran under different error budgets; default K uses the smallest "
            "(max_errors = 6)",
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
    ],
)
def test_each_notice_in_words(notice: Notice, words: str) -> None:
    assert warning(notice) == words


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
