"""The analysis on τ²-bench's own files (tests/fixtures/tau2/v1.0, written by τ²'s code):
the numbers must match what the files say."""

from __future__ import annotations

from pathlib import Path

import pytest

from flatscore.analysis.analyze import AnalysisOptions, analyze
from flatscore.analysis.result import ArmStats
from flatscore.formats import load_runs

V1 = Path(__file__).parents[1] / "fixtures" / "tau2" / "v1.0"
OPTS = AnalysisOptions(bootstrap=200)


def only_arm(*names: str) -> ArmStats:
    result = analyze(load_runs([V1 / n for n in names]), OPTS)
    assert len(result.cells) == 1 and len(result.cells[0].arms) == 1
    return result.cells[0].arms[0]


def test_ok_file() -> None:
    """2 trials, user_stop, reward 1; each: unknown get_user, create_task missing an argument,
    then two good calls."""
    arm = only_arm("ok.json")
    assert (arm.episodes, arm.tasks, arm.trials_min) == (2, 1, 2)
    assert arm.success_rate == 1.0 and arm.pass_k == [1.0, 1.0]
    assert arm.agent_tool_calls == 8 and arm.failed_agent_calls == 4
    # get_user is not a mock-domain tool, but the plural get_users is: a near miss.
    assert arm.channels["near_miss"].count == 2 and arm.channels["invented"].count == 0
    assert arm.channels["bad_arguments"].count == 2  # "missing 1 required positional argument"
    assert arm.channels["unknown_tool"].rate == pytest.approx(2 / 8)
    # Two failures per episode: S(0) = S(1) = 0, S(2..9) = 1 (max_errors 10 → default K 9).
    s = {p.K: p.success_rate for p in arm.budget_curve}
    assert s[0] == 0.0 and s[1] == 0.0 and s[2] == 1.0 and s[9] == 1.0
    # get_user fails → next (create_task) fails; create_task fails → next succeeds.
    assert arm.recovery_rate == pytest.approx(1 / 2)
    assert arm.termination_reasons == {"user_stop": 2}
    assert arm.recorded_max_errors == 10


def test_too_many_errors_file() -> None:
    """bad.json: three unknown-tool errors, stopped at max_errors = 3 → default K = 2."""
    result = analyze(load_runs([V1 / "bad.json"]), OPTS)
    assert result.settings.default_K == 2
    arm = result.cells[0].arms[0]
    assert arm.termination_reasons == {"too_many_errors": 1}
    assert arm.failed_agent_calls == 3 and arm.channels["invented"].count == 3
    assert arm.max_failed_calls == 3 and arm.success_rate == 0.0
    assert arm.hallucinated_names == {"no_such_tool": 3}


def test_alternating_errors_file() -> None:
    """alt.json: error, success, error → too_many_errors at max_errors = 2 (never reset)."""
    arm = only_arm("alt.json")
    assert arm.failed_agent_calls == 2 and arm.agent_tool_calls == 3
    assert arm.recovery_rate == pytest.approx(1 / 2)  # the last failure has no next call
    assert arm.termination_reasons == {"too_many_errors": 1}


def test_infrastructure_error_excluded() -> None:
    # badjson.json re-ran the task's trial 0 (an infrastructure error): as a third trial of
    # the same run it is a new episode, not a duplicate.
    bad = [e.model_copy(update={"trial": 2}) for e in load_runs([V1 / "badjson.json"])]
    result = analyze([*load_runs([V1 / "ok.json"]), *bad], OPTS)
    arm = result.cells[0].arms[0]
    assert result.episodes_read == 3 and result.infrastructure_errors == 1
    assert arm.episodes == 2 and arm.infrastructure_errors == 1
    assert arm.success_rate == 1.0 and arm.pass_k == [1.0, 1.0]
    assert "infrastructure_error" not in arm.termination_reasons


def test_max_steps_file() -> None:
    arm = only_arm("steps.json")
    assert arm.success_rate == 0.0 and arm.termination_reasons == {"max_steps": 2}
    assert all(p.success_rate == 0.0 for p in arm.budget_curve)


def test_telecom_user_side_calls_and_role_confusion() -> None:
    """τ² v0.2 telecom: the agent calls the user's `toggle_roaming` (role confusion); the user
    makes 3 calls, one failing. User calls stay out of agent rates but count in S(K) under
    `--count all`."""
    telecom = Path(__file__).parents[1] / "fixtures" / "tau2" / "v0.2" / "telecom.json"
    for count, s1 in (("all", 0.0), ("agent", 1.0)):
        opts = AnalysisOptions(bootstrap=100, count=count, budgets=[0, 1, 2])
        arm = analyze(load_runs([telecom]), opts).cells[0].arms[0]
        assert (arm.agent_tool_calls, arm.failed_agent_calls) == (2, 1)
        assert (arm.user_tool_calls, arm.user_failed_calls) == (3, 1)
        assert arm.channels["role_confusion"].count == 1 and arm.channels["invented"].count == 0
        assert arm.channels["role_confusion"].rate == pytest.approx(1 / 2)
        assert arm.hallucinated_names == {"toggle_roaming": 1}
        s = {p.K: p.success_rate for p in arm.budget_curve}
        assert s[0] == 0.0 and s[1] == s1 and s[2] == 1.0
