"""The verdict rule (`verdict_rule.decide`) at its edges: a study with exactly the paired
tasks the channel intervals need tests its channels; one task fewer does not."""

from __future__ import annotations

import pytest

from flatscore.analysis.verdict_rule import BudgetTest, Clause, Evidence, decide
from flatscore.report.verdict_reason import decision_words

FLAT = BudgetTest(
    K=9,
    gap=0.0,
    ci_low=-0.02,
    ci_high=0.02,
    p_value=1.0,
    p_adjusted=1.0,
    tost_p=0.001,
    equivalent=True,
    drop_bound=0.015,
    drop_ruled_out=True,
)


def _evidence(paired: int, needed: int) -> Evidence:
    return Evidence(margin=0.075, alpha=0.05, budgets=[FLAT], paired_tasks=paired, min_tasks=needed)


@pytest.mark.parametrize("needed", [2, 10, 30])
def test_exactly_the_tasks_the_channels_need_tests_them(needed: int) -> None:
    at = decide(_evidence(needed, needed))
    assert at.verdict == "no damage detected", at.undecided
    assert (at.head, at.amplified, at.undecided) == ("equivalent", (), ())
    short = decide(_evidence(needed - 1, needed))
    assert short.verdict == "inconclusive"
    assert short.undecided == (Clause("channels not tested"),)
    words = decision_words(short)
    assert f"channels not tested: {needed - 1} paired task(s), their intervals need" in words
