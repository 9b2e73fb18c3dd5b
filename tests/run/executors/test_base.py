"""Jobs are plain data; building an agent from a recipe gives the study's label and repair."""

from __future__ import annotations

import asyncio
import pickle

from flatscore.agents.repair import RepairAgent
from flatscore.episode import ErrorBudget
from flatscore.run.builtin.agent import build_agent, build_user
from flatscore.run.executors.base import run_job_sync
from flatscore.run.jobs import AgentRecipe, EpisodeJob
from flatscore.run.sources import run_job
from flatscore.study import RepairConfig, UserSpec


def job(arm: str = "ref", label: str = "oracle", **recipe: object) -> EpisodeJob:
    return EpisodeJob(
        run="r.jsonl",
        study="s",
        arm=arm,
        domain="retail",
        task_id="cancel_00",
        trial=0,
        seed=300,
        max_steps=40,
        error_budget=ErrorBudget(max_errors=10),
        agent=AgentRecipe(label=label, agent="oracle", **recipe),  # type: ignore[arg-type]
        user=UserSpec(),
    )


def test_job_is_plain_data() -> None:
    j = job(options={"slip_rate": 0.5}, repair=RepairConfig(channels=["unknown_tool"], attempts=2))
    assert pickle.loads(pickle.dumps(j)) == j
    assert EpisodeJob.model_validate_json(j.model_dump_json()) == j


def test_episode_id_includes_the_model() -> None:
    """Two models may share arm names: their episodes must not share ids."""
    assert job(label="a").episode_id != job(label="b").episode_id
    assert job(label="a").episode_id == job(label="a").episode_id
    assert job(arm="x").episode_id != job(arm="y").episode_id


def test_build_agent_label_and_repair() -> None:
    agent = build_agent(job(label="my-model").agent, 300)
    assert agent.name == "my-model"
    repaired = build_agent(
        job(repair=RepairConfig(channels=["unknown_tool"], attempts=2)).agent, 300
    )
    assert isinstance(repaired, RepairAgent) and repaired.name == "oracle"
    assert repaired.config.attempts == 2
    assert build_user(UserSpec(patience=5), 300).patience == 5  # type: ignore[attr-defined]


def test_run_job_async_and_sync_agree() -> None:
    j = job()
    a = asyncio.run(run_job(j))
    b = run_job_sync(j)
    assert a.episode_id == b.episode_id == j.episode_id
    assert a.model == "oracle" and a.arm == "ref" and a.seed == 300
    strip = {"timing", "messages"}
    assert a.model_dump(exclude=strip) == b.model_dump(exclude=strip)
    assert [m.content for m in a.messages] == [m.content for m in b.messages]
    assert a.succeeded


def test_episode_records_its_source_and_checkpoint() -> None:
    j = job()
    j = j.model_copy(update={"agent": j.agent.model_copy(update={"checkpoint": "org/model-awq"})})
    ep = run_job_sync(j)
    assert ep.metadata["played_by"] == "oracle"
    assert ep.metadata["checkpoint"] == "org/model-awq"


def test_build_user_takes_the_kind_from_its_registry() -> None:
    """A user simulator registered by a plug-in is built by its name, with the options its
    spec gives; whether it needs a model is read from its factory (`backend`), where the
    study is checked."""
    import pytest

    from flatscore.run.checks import check_user_backend
    from flatscore.study import BackendSpec
    from flatscore.users import ScriptedUser, register_user
    from flatscore.users.base import USERS

    class Patient(ScriptedUser):
        pass

    register_user("patient", Patient)
    try:
        user = build_user(UserSpec(kind="patient", patience=7), 300)
        assert isinstance(user, Patient) and user.patience == 7
        with pytest.raises(ValueError, match="'backend' does not apply"):
            check_user_backend(UserSpec(kind="patient", backend=BackendSpec(kind="embedded")))
        with pytest.raises(ValueError, match="user simulator 'llm' needs 'backend'"):
            check_user_backend(UserSpec(kind="llm"))
    finally:
        USERS.unregister("patient")
