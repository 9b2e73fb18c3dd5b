from __future__ import annotations

import numpy as np
import pytest

from flatscore.analysis.budget import parse_budgets, success_within_budgets
from flatscore.errors import InputError


def test_parse_budgets() -> None:
    assert parse_budgets("0-3") == [0, 1, 2, 3]
    assert parse_budgets("9, 0,2-3") == [0, 2, 3, 9]
    for bad in ("x", "3-1", "-1", "1,,2"):
        with pytest.raises(InputError):
            parse_budgets(bad)


def test_success_within_budgets_by_hand() -> None:
    s = success_within_budgets(np.array([True, True, False]), np.array([0, 2, 0]), [0, 1, 2])
    assert s.tolist() == [[1, 1, 1], [0, 0, 1], [0, 0, 0]]


def test_budget_curve_intervals_match_a_plain_resampling_loop() -> None:
    from analysis_builders import episode

    from flatscore.analysis.budget import budget_curve_intervals
    from flatscore.analysis.channels import load_rules
    from flatscore.analysis.facts import episode_facts
    from flatscore.analysis.stats import percentile_ci, resample_counts

    rules = load_rules()
    eps = [
        episode("a", "t1", 0, [("get_user", "ok")]),
        episode("a", "t1", 1, [("nope", "fail")], success=True),
        episode("a", "t2", 0, [("nope", "fail"), ("nope", "fail")], success=True),
        episode("a", "t3", 0, [], success=False),
    ]
    facts = [episode_facts(e, rules) for e in eps]
    got = budget_curve_intervals(facts, [0, 1, 2], "all", 400, np.random.default_rng(7), 0.9)
    # The same resamples, evaluated by a plain loop over tasks and episodes.
    weights = resample_counts(3, 400, np.random.default_rng(7))
    failures = {"t1": [0, 1], "t2": [2], "t3": [None]}  # None: not a success
    for j, k in enumerate([0, 1, 2]):
        values = []
        for w in weights:
            ok = n = 0.0
            for t, c in zip(["t1", "t2", "t3"], w, strict=True):
                ok += c * sum(1 for f in failures[t] if f is not None and f <= k)
                n += c * len(failures[t])
            values.append(ok / n)
        assert got[j] == pytest.approx(percentile_ci(np.array(values), 0.9))


def test_budget_curve_intervals_degenerate_when_every_episode_succeeds() -> None:
    from analysis_builders import episode

    from flatscore.analysis.budget import budget_curve_intervals
    from flatscore.analysis.channels import load_rules
    from flatscore.analysis.facts import episode_facts

    facts = [episode_facts(episode("a", f"t{i}"), load_rules()) for i in range(4)]
    got = budget_curve_intervals(facts, [0, 3], "all", 200, np.random.default_rng(0), 0.95)
    assert got == [(1.0, 1.0), (1.0, 1.0)]
