"""The quick form of `flatscore run` as a one-model study: determinism, paired seeds across
arms, resume, refusing to overwrite, its defaults, and the same episodes and ids as the
equivalent study file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from flatscore import defaults
from flatscore.errors import InputError
from flatscore.run.driver import StudyOutcome, plan_study, run_study
from flatscore.run.episode_source import trial_seed
from flatscore.run.quick import QuickRun, run_quick
from flatscore.run.study import load_study
from flatscore.store.jsonl import read_episodes
from run_files import comparable_episodes


def _run(out: Path, resume: bool = False, **settings: Any) -> StudyOutcome:
    quick = QuickRun.parse(**{"domains": ["retail", "telecom"], **settings})
    return run_quick(quick, out, resume=resume, progress=False)


def _some_tasks(per_domain: int = 12) -> list[str]:
    """The first test-split tasks of each built-in domain (the fast suite's slice)."""
    from flatscore.domains import get_domain

    return [t.id for d in ("retail", "telecom") for t in get_domain(d).tasks("test")[:per_domain]]


@pytest.mark.slow  # 2 × 228 episodes; the same on 24 tasks below
def test_same_seeds_give_identical_episodes(tmp_path: Path) -> None:
    _run(tmp_path / "a.jsonl", concurrency=1)
    _run(tmp_path / "b.jsonl", concurrency=8)
    a, b = comparable_episodes([tmp_path / "a.jsonl"]), comparable_episodes([tmp_path / "b.jsonl"])
    assert len(a) == 228 and a == b


def test_same_seeds_give_identical_episodes_on_some_tasks(tmp_path: Path) -> None:
    tasks = _some_tasks()
    _run(tmp_path / "a.jsonl", concurrency=1, task_ids=tasks, agent_options={"slip_rate": 0.3})
    _run(tmp_path / "b.jsonl", concurrency=8, task_ids=tasks, agent_options={"slip_rate": 0.3})
    a, b = comparable_episodes([tmp_path / "a.jsonl"]), comparable_episodes([tmp_path / "b.jsonl"])
    assert len(a) == len(tasks) == 24 and a == b


def test_quick_form_is_the_one_model_study(tmp_path: Path) -> None:
    """The quick form and the study file it stands for: the same episodes, the same ids."""
    tasks = ["cancel_00", "return_00", "airplane_05"]
    quick = tmp_path / "quick.jsonl"
    _run(quick, agent="noop", trials=2, task_ids=tasks)
    study_file = tmp_path / "study.yaml"
    study_file.write_text(
        yaml.safe_dump(
            {
                "name": "adhoc",
                "output": "out",
                "models": [{"name": "noop", "kind": "agent", "agent": "noop", "arms": ["noop"]}],
                "domains": ["retail", "telecom"],
                "task_ids": tasks,
                "trials": 2,
            }
        ),
        "utf-8",
    )
    study = load_study(study_file)
    run_study(study, progress=False, report=False)
    [study_run] = (tmp_path / "out" / "runs").glob("*.jsonl")
    a, b = comparable_episodes([quick]), comparable_episodes([study_run])
    assert len(a) == 6 and a == b  # 3 tasks × 2 trials
    planned = {j.episode_id for j in plan_study(study).jobs}
    assert set(a) == planned


def test_defaults_are_the_study_defaults() -> None:
    """One set of defaults: the quick form's one-model study is recorded under τ²'s budget."""
    study = QuickRun.parse().to_study()
    assert study.error_budget.max_errors == defaults.MAX_ERRORS == 10
    assert (study.seed, study.max_steps, study.concurrency) == (
        defaults.SEED,
        defaults.MAX_STEPS,
        defaults.CONCURRENCY,
    )
    assert study.name == "adhoc" and study.domains == ["retail", "telecom"]


def test_trials_get_their_own_seed_and_arms_share_them(tmp_path: Path) -> None:
    assert trial_seed(300, 0) == 300 and trial_seed(300, 2) == 302
    _run(tmp_path / "x.jsonl", trials=2, arm="x", task_ids=["cancel_00", "airplane_00"])
    _run(tmp_path / "y.jsonl", trials=2, arm="y", task_ids=["cancel_00", "airplane_00"])
    x = list(read_episodes(tmp_path / "x.jsonl"))
    y = list(read_episodes(tmp_path / "y.jsonl"))
    key = lambda e: (e.domain, e.task_id, e.trial)  # noqa: E731
    assert sorted((key(e), e.seed) for e in x) == sorted((key(e), e.seed) for e in y)
    assert {e.seed for e in x} == {300, 301}
    assert {e.episode_id for e in x}.isdisjoint({e.episode_id for e in y})
    users = lambda eps: {key(e): [m.content for m in e.messages if m.role == "user"] for e in eps}  # noqa: E731
    assert users(x) == users(y)  # same seed, same user behaviour in both arms


@pytest.mark.parametrize(
    "tasks",
    [pytest.param(None, id="test-split", marks=pytest.mark.slow), pytest.param(24, id="24-tasks")],
)
def test_resume_runs_only_what_is_missing(tmp_path: Path, tasks: int | None) -> None:
    out = tmp_path / "r.jsonl"
    some = {} if tasks is None else {"task_ids": _some_tasks(tasks // 2)}
    n = tasks or 228
    first = _run(out, trials=1, **some)
    assert (first.written, first.skipped, first.succeeded) == (n, 0, n)
    with pytest.raises(InputError, match="pass --resume"):
        _run(out, trials=1, **some)
    second = _run(out, resume=True, trials=2, **some)
    assert (second.planned, second.skipped, second.written) == (2 * n, n, n)
    ids = [e.episode_id for e in read_episodes(out)]
    assert len(ids) == len(set(ids)) == 2 * n
    two_trials = QuickRun.parse(domains=["retail", "telecom"], trials=2, **some).to_study()
    assert set(ids) == {j.episode_id for j in plan_study(two_trials).jobs}


def test_noop_run_records_failures(tmp_path: Path) -> None:
    tasks = _some_tasks()[:12]  # retail's first 12
    summary = _run(tmp_path / "n.jsonl", agent="noop", domains=["retail"], task_ids=tasks)
    assert summary.succeeded == 0 and summary.terminations == {"user_stop": 12}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"agent": "gpt9"}, "unknown agent 'gpt9'"),
        ({"domains": ["airline"]}, "unknown domain 'airline'"),
        ({"user": "llm"}, "needs a model backend"),
        ({"counted": "some"}, "field 'counted'"),
        ({"agent_options": {"slip_rate": 3}}, "field '--agent-opt'"),
        ({"repair": {"mode": "on", "channels": ["x"]}}, "field '--repair-channels'"),
    ],
)
def test_bad_settings_are_one_input_error(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError) as info:
        QuickRun.parse(**settings)
    assert message in str(info.value)
