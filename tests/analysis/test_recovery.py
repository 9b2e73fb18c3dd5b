"""Recovery: a failed call is recovered only when the next agent call got a successful answer."""

from __future__ import annotations

from analysis_builders import episode
from flatscore.analysis.arm_stats import arm_stats
from flatscore.analysis.channels import load_rules
from flatscore.analysis.facts import episode_facts

RULES = load_rules()


def test_a_next_call_without_an_answer_is_not_a_recovery() -> None:
    ep = episode("bf16", "t1", 0, [("get_user", "fail"), ("get_user", None)])
    f = episode_facts(ep, RULES)
    assert (f.agent_failed, f.unanswered, f.failed_with_next, f.recovered) == (1, 1, 1, 0)
    assert arm_stats("bf16", [f], 0, [0], "all").recovery_rate == 0.0


def test_recovered_when_the_next_call_succeeds() -> None:
    ep = episode("bf16", "t1", 0, [("get_user", "fail"), ("get_user", "fail"), ("get_user", "ok")])
    f = episode_facts(ep, RULES)
    assert (f.agent_failed, f.failed_with_next, f.recovered) == (2, 2, 1)
