"""examples/embedded-study.yaml and embedded-study-repair.yaml load and plan the study as
docs/embedded-study.md describes it: paired arms, trial-major order, the repair pass's twins
in the main study, sampled episodes seeded per episode. (Its chunked archive and commands:
tests/store/test_archive.py, tests/run/test_time_limit.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from flatscore.run.arm_backend import arm_backend
from flatscore.run.driver import plan_study, run_study
from flatscore.run.study import load_study
from run_files import study_episodes

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


# --------------------------------------------------------------------------- the study file


def test_embedded_study_file_is_the_documented_design() -> None:
    study = load_study(EXAMPLES / "embedded-study.yaml")
    assert study.output_dir.is_relative_to(EXAMPLES)
    (model,) = study.models
    assert model.kind == "embedded" and model.threads == 1
    assert list(model.arms) == ["ref", "fp8", "int8", "int4-awq", "int4"]
    assert [arm_backend(model, a).quant for a in model.arms] == list(model.arms)  # type: ignore[union-attr]
    assert model.sampling.temperature == 0.5 and model.sampling.top_p == 1.0
    assert (study.domains, study.split, study.task_ids, study.tasks_per_domain) == (
        ["retail", "telecom"],
        "test",
        None,
        None,
    )
    assert (study.trials, study.order, study.seed, study.repair.mode) == (4, "trial", 300, "off")
    assert study.user.kind == "scripted"
    assert (study.error_budget.max_errors, study.error_budget.counted) == (10, "all")
    assert study.analysis.reference == "ref"
    assert study.analysis.budgets == list(range(10))  # `0-9` in the file: S(K), K = 0..9

    plan = plan_study(study)
    assert len(plan.jobs) == 114 * 4 * 5 * 2
    coords: dict[str, list[tuple[str, str, int, int]]] = {}
    for job in plan.jobs:
        coords.setdefault(job.arm, []).append((job.domain, job.task_id, job.trial, job.seed))
        assert job.seed == 300 + job.trial  # the episode seed; turn n samples with seed*1000+n
        assert job.error_budget.max_errors == 10
    first = coords["ref"]
    assert len(set(first)) == 114 * 4 * 2
    assert all(c == first for c in coords.values())  # paired: same list, same seeds, every arm
    assert [t for _, _, t, _ in first] == sorted(t for _, _, t, _ in first)  # trial-major


def test_repair_pass_file_is_the_documented_design() -> None:
    """examples/embedded-study-repair.yaml: trial 0 of the main study (same seed), 57 tasks
    per domain round-robin over the templates; ref, the 4-bit arms and the 8-bit arms (added
    when their channels were amplified on 114 x 4) repaired."""
    from flatscore.run.demo import stratified_task_ids

    main = load_study(EXAMPLES / "embedded-study.yaml")
    study = load_study(EXAMPLES / "embedded-study-repair.yaml")
    (model,) = study.models
    assert list(model.arms) == ["ref", "int4-awq", "int4", "fp8", "int8"]
    assert model.sampling == main.models[0].sampling
    assert study.task_ids == stratified_task_ids(["retail", "telecom"], "test", 57)
    assert (study.trials, study.seed, study.max_steps) == (1, main.seed, main.max_steps)
    assert study.repair.mode == "on"
    assert study.repair.channels == ["unknown_tool", "bad_arguments", "entity_not_found"]
    assert study.output_dir != main.output_dir
    main_jobs = {(j.arm, j.domain, j.task_id, j.trial, j.seed) for j in plan_study(main).jobs}
    jobs = plan_study(study).jobs
    assert len(jobs) == 5 * 114
    assert {
        (j.arm.removesuffix("+repair"), j.domain, j.task_id, j.trial, j.seed) for j in jobs
    } <= (main_jobs)  # every repaired episode has its plain twin in the main study


def test_trial_major_order_keeps_the_runners_order_within_a_trial(tmp_path: Path) -> None:
    data = yaml.safe_load((EXAMPLES / "smoke.yaml").read_text("utf-8"))
    data.update({"output": "out", "tasks_per_domain": 3, "trials": 2})
    (tmp_path / "smoke.yaml").write_text(yaml.safe_dump(data), "utf-8")
    study = load_study(tmp_path / "smoke.yaml")
    assert study.order == "domain"
    jobs = plan_study(study).jobs
    ordered = plan_study(study.model_copy(update={"order": "trial"})).jobs
    assert sorted(j.episode_id for j in ordered) == sorted(j.episode_id for j in jobs)
    assert [j.trial for j in ordered] == sorted(j.trial for j in jobs)
    assert [j.trial for j in jobs] != sorted(j.trial for j in jobs)  # domain-major before
    for trial in (0, 1):
        assert [j for j in ordered if j.trial == trial] == [j for j in jobs if j.trial == trial]


@pytest.mark.slow
@pytest.mark.timeout(1800)  # two short episodes: ~1 min idle, 12 min on a loaded machine
def test_sampled_episodes_are_seeded_per_episode(tmp_path: Path) -> None:
    """The study's sampling on the real embedded model: rerunning the same episodes (same
    episode seeds, hence the same per-turn sampling seeds) gives identical transcripts, so
    sampled arms are paired on their sampling noise, not only on the user."""
    import torch

    torch.set_num_threads(1)
    study = load_study(EXAMPLES / "embedded-study.yaml")
    model = study.models[0]
    small = study.model_copy(
        update={
            "models": [model.model_copy(update={"arms": {"ref": model.arms["ref"]}})],
            "domains": ["telecom"],
            "task_ids": ["refuel_08"],
            "trials": 1,
            "concurrency": 1,
            "max_steps": 8,
        }
    )
    runs = []
    for name in ("a", "b"):
        study_copy = small.model_copy(update={"output": str(tmp_path / name)})
        run_study(study_copy, report=False, progress=False)
        runs.append(study_episodes(tmp_path / name))
    assert len(runs[0]) == 1 and runs[0] == runs[1]  # the second run after the first: warm caches
