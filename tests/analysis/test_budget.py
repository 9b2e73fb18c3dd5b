from __future__ import annotations

import numpy as np
import pytest

from analysis_builders import episode
from flatscore.analysis.budget import (
    budgets_with,
    default_budget,
    parse_budgets,
    success_within_budgets,
)
from flatscore.analysis.channels import load_rules
from flatscore.analysis.facts import episode_facts
from flatscore.analysis.trials import parse_trials
from flatscore.defaults import DEFAULT_K
from flatscore.errors import InputError


def test_parse_budgets() -> None:
    assert parse_budgets("0-3") == [0, 1, 2, 3]
    assert parse_budgets("9, 0,2-3") == [0, 2, 3, 9]
    for bad in ("x", "3-1", "-1", "1,,2"):
        with pytest.raises(InputError):
            parse_budgets(bad)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x", "bad budget list 'x': expected e.g. 0-10 or 0,2,9"),
        ("1,3-1,x", "bad budget range '3-1': end before start"),  # the first bad part
        ("0-1001", "bad budget '0-1001': K above 1000 is not supported"),
    ],
)
def test_budget_list_messages(text: str, message: str) -> None:
    with pytest.raises(InputError) as err:
        parse_budgets(text)
    assert err.value.message == message and err.value.field == "budgets"


def test_parse_trials_shares_the_range_syntax_with_its_own_bounds() -> None:
    assert parse_trials(" 1-2, 4") == [1, 2, 4]
    for bad in ("0", "0-2", "x", "1,,2", "1-1001"):
        with pytest.raises(InputError, match="bad trial list") as err:
            parse_trials(bad)
        assert err.value.field == "trials"
    with pytest.raises(InputError, match="bad trial range '2-1': end before start") as err:
        parse_trials("2-1")
    assert err.value.field == "trials"


def test_default_budget_known_answers() -> None:
    rules = load_rules()
    calls = [("get_user", "fail")] * 3

    def facts(*max_errors: int | None) -> list:
        return [
            episode_facts(episode("a", f"t{i}", 0, calls, max_errors=m), rules)
            for i, m in enumerate(max_errors)
        ]

    assert default_budget(facts(10, 6), "all") == (5, "recorded")
    # τ²'s "no limit": the largest count (words: tests/report/test_budget_text.py)
    assert default_budget(facts(0, 0), "all") == (3, "unlimited")
    assert default_budget(facts(None), "agent") == (DEFAULT_K, "default")
    assert budgets_with(None, 2) == [0, 1, 2] and budgets_with([5], 2) == [2, 5]


def test_success_within_budgets_by_hand() -> None:
    s = success_within_budgets(np.array([True, True, False]), np.array([0, 2, 0]), [0, 1, 2])
    assert s.tolist() == [[1, 1, 1], [0, 0, 1], [0, 0, 0]]
