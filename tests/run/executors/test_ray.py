"""The Ray executor on a local Ray instance with 2 workers: the same episodes as the local
executor, each written once by the driver, and resume works the same way."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from flatscore.run.driver import run_study
from flatscore.run.study import load_study
from flatscore.study import Study
from run_files import study_episodes

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("ray") is None,
        reason="ray is not installed (pip install 'flatscore[ray]' to run the Ray executor test)",
    ),
    pytest.mark.slow,  # starting a Ray instance takes 10-25 s here
]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def small_smoke(out: Path) -> Study:
    study = load_study(EXAMPLES / "smoke.yaml")
    return study.model_copy(update={"output": str(out), "tasks_per_domain": 3, "trials": 1})


def test_ray_matches_local_and_resumes(tmp_path: Path) -> None:
    from flatscore.run.executors.ray import RayExecutor

    local = run_study(small_smoke(tmp_path / "local"), progress=False, report=False)
    assert local.written == 3 * 2 * 3  # arms (oracle ref/slips, noop ref) × domains × tasks

    # A killed run: drop the last two episodes of one file and leave a partial line.
    study = small_smoke(tmp_path / "ray")
    run_study(study, progress=False, report=False)
    run_file = tmp_path / "ray" / "runs" / "oracle__slips.jsonl"
    kept = run_file.read_text("utf-8").splitlines()[:-2]
    run_file.write_text("\n".join(kept) + "\n" + '{"episode_id": "cut', "utf-8")

    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        assert ray.cluster_resources()["CPU"] == 2.0  # two workers, one episode each
        executor = RayExecutor()  # joins the running instance
        resumed = run_study(study, executor=executor, resume=True, progress=False)
        assert ray.is_initialized()  # an instance it did not start is left running
    finally:
        ray.shutdown()
    assert (resumed.written, resumed.skipped) == (2, local.written - 2)
    assert study_episodes(tmp_path / "ray") == study_episodes(tmp_path / "local")
    assert resumed.report is not None and resumed.report.analysis.exists()
