"""Test helpers shared by the run-path tests: a study file written from a dict, its refusal,
and the
episodes of run files as plain data, without the wall-clock fields, so two runs of the same
seeds compare with `==`."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

from flatscore.domains import get_domain
from flatscore.episode import ErrorBudget
from flatscore.errors import InputError
from flatscore.run.jobs import AgentRecipe, EpisodeJob
from flatscore.run.study import load_study
from flatscore.store.jsonl import read_episodes
from flatscore.study import UserSpec


def write_study(folder: Path, name: str, models: list[dict[str, Any]], **fields: Any) -> Path:
    """`folder/study.yaml`: study `name` of `models` (and any other study `fields`), its
    output `folder/out`."""
    study = {"name": name, "output": str(folder / "out"), "models": models, **fields}
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(study), encoding="utf-8")
    return path


def study_refusal(path: Path) -> InputError:
    """The one-line InputError that loading the study file `path` raises, naming the file."""
    with pytest.raises(InputError) as info:
        load_study(path)
    assert info.value.file == str(path) and "\n" not in info.value.one_line()
    return info.value


def comparable_episodes(paths: Iterable[Path]) -> dict[str, dict[str, Any]]:
    """Every episode of `paths`, by id, with the measurements of the machine dropped — `timing`,
    each message's `latency_s` and `timing` (prefill/decode seconds, tokens encoded: a warm
    prefix cache encodes fewer), `serving.peak_rss_bytes` — the only fields allowed to differ
    between two runs of the same seeds; fails on an id written twice."""
    out: dict[str, dict[str, Any]] = {}
    for path in paths:
        for ep in read_episodes(path):
            assert ep.episode_id not in out, f"{path}: episode {ep.episode_id} written twice"
            data = ep.model_dump(mode="json", exclude={"timing"})
            for message in data["messages"]:
                message.pop("latency_s")
                message.pop("timing", None)
            if isinstance(data.get("serving"), dict):
                data["serving"].pop("peak_rss_bytes", None)
            out[ep.episode_id] = data
    return out


def study_episodes(folder: Path) -> dict[str, dict[str, Any]]:
    """`comparable_episodes` of every run file of a study's output folder."""
    return comparable_episodes(sorted((folder / "runs").glob("*.jsonl")))


def oracle_jobs(
    n_tasks: int = 4, arms: tuple[str, ...] = ("ref", "b"), run: str | None = None
) -> list[EpisodeJob]:
    """The oracle's jobs on retail's first test tasks, in the study's order (task by task,
    the arms side by side); each arm its own run file `m__<arm>` unless `run` names one for
    all (a path, or a name)."""
    tasks = [t.id for t in get_domain("retail").tasks("test")[:n_tasks]]
    return [
        EpisodeJob(
            run=run or f"m__{arm}",
            study="s",
            arm=arm,
            domain="retail",
            task_id=task,
            trial=0,
            seed=300,
            max_steps=40,
            error_budget=ErrorBudget(max_errors=10),
            agent=AgentRecipe(label="oracle", agent="oracle"),
            user=UserSpec(),
        )
        for task in tasks
        for arm in arms
    ]


SEQUENTIAL_STUDY = """\
name: seq
output: out
models:
  - name: oracle
    kind: agent
    agent: oracle
    arms:
      ref: {options: {slip_rate: 0.2}}
      same: {options: {slip_rate: 0.2}}
      slips: {options: {slip_rate: 0.9}}
domains: [retail]
split: test
tasks_per_domain: 24
trials: 2
stopping: sequential
user: {kind: scripted}
error_budget: {max_errors: 3}
concurrency: 2
analysis: {reference: ref, bootstrap: 100}
"""
"""A sequential study of the oracle: `slips` fails most calls and the budget of 3 failed
calls ends many of its episodes, so its damage is decided before the maximum (24 tasks);
`same` cannot be told apart from `ref` in 24 tasks and runs to the maximum."""
