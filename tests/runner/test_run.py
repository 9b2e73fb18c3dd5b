"""Run execution: determinism, paired seeds across arms, resume, refusing to overwrite."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from flatscore.agents import make_agent
from flatscore.errors import InputError
from flatscore.runner import RunConfig, plan_episodes, run, trial_seed
from flatscore.store import read_episodes
from flatscore.users import make_user


def _run(out: Path, resume: bool = False, agent: str = "oracle", **config: Any) -> Any:
    cfg = RunConfig(**{"domains": ["retail", "telecom"], "split": "test", **config})
    return run(
        cfg,
        out,
        lambda: make_agent(agent),
        lambda: make_user("scripted"),
        resume=resume,
        progress=False,
    )


def _comparable(path: Path) -> dict[str, dict[str, Any]]:
    """Episodes by id, without wall-clock fields."""
    out = {}
    for ep in read_episodes(path):
        data = ep.model_dump(mode="json", exclude={"timing"})
        for m in data["messages"]:
            m.pop("latency_s")
        out[ep.episode_id] = data
    return out


def test_same_seeds_give_identical_episodes(tmp_path: Path) -> None:
    _run(tmp_path / "a.jsonl", concurrency=1)
    _run(tmp_path / "b.jsonl", concurrency=8)
    a, b = _comparable(tmp_path / "a.jsonl"), _comparable(tmp_path / "b.jsonl")
    assert len(a) == 228 and a == b


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


def test_resume_runs_only_what_is_missing(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    first = _run(out, trials=1)
    assert (first.written, first.skipped, first.succeeded) == (228, 0, 228)
    with pytest.raises(InputError, match="pass --resume"):
        _run(out, trials=1)
    second = _run(out, resume=True, trials=2)
    assert (second.planned, second.skipped, second.written) == (456, 228, 228)
    ids = [e.episode_id for e in read_episodes(out)]
    assert len(ids) == len(set(ids)) == 456
    assert {e.episode_id for e in read_episodes(out)} == {
        s.episode_id for s in plan_episodes(RunConfig(domains=["retail", "telecom"], trials=2))
    }


def test_noop_run_records_failures(tmp_path: Path) -> None:
    summary = _run(tmp_path / "n.jsonl", agent="noop", domains=["retail"])
    assert summary.succeeded == 0 and summary.terminations == {"user_stop": 114}
