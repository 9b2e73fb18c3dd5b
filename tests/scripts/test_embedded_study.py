"""examples/embedded-study.yaml loads and plans the study as documented; the chunked driver
(scripts/embedded_study.py) packs, unpacks and resumes a study without losing or
duplicating an episode (on the smoke study: the oracle, no model)."""

from __future__ import annotations

import json
import lzma
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from flatscore.store import read_episodes
from flatscore.study import load_study
from flatscore.study_run import plan_study, run_study
from run_files import study_episodes
from script_modules import load_script

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SCRIPT = ROOT / "scripts" / "embedded_study.py"


driver = load_script("embedded_study")


# --------------------------------------------------------------------------- the study file


def test_embedded_study_file_is_the_documented_design() -> None:
    study = load_study(EXAMPLES / "embedded-study.yaml")
    assert study.output_dir.is_relative_to(EXAMPLES)
    (model,) = study.models
    assert model.kind == "embedded" and model.threads == 1
    assert list(model.arms) == ["ref", "fp8", "int8", "int4-awq", "int4"]
    assert [model.backend(a).quant for a in model.arms] == list(model.arms)  # type: ignore[union-attr]
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
    from flatscore.demo import stratified_task_ids

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


# --------------------------------------------------------------------------- the driver


def _smoke(tmp_path: Path, name: str = "smoke.yaml", output: str = "out") -> Path:
    data = yaml.safe_load((EXAMPLES / "smoke.yaml").read_text("utf-8"))
    data.update({"output": output, "tasks_per_domain": 3, "trials": 2})
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), "utf-8")
    return path


def _ids(folder: Path) -> list[str]:
    return [
        json.loads(line)["episode_id"]
        for path in sorted((folder / "runs").glob("*.jsonl"))
        for line in path.read_text("utf-8").splitlines()
    ]


def test_pack_unpack_resume_round_trip(tmp_path: Path) -> None:
    study = load_study(_smoke(tmp_path))
    archive = tmp_path / "archive"
    out = study.output_dir
    # session 1: the first trial only, then a kill mid-write leaves a partial line
    run_study(study.model_copy(update={"trials": 1}), resume=True, report=False, progress=False)
    first = study_episodes(out)
    assert len(first) == 3 * 2 * 3  # run files × domains × tasks
    ref = out / "runs" / "oracle__ref.jsonl"
    with ref.open("a", encoding="utf-8") as fh:
        fh.write('{"episode_id": "half-writ')
    assert driver.pack(study, archive) == {
        "oracle__ref.jsonl": 6,
        "oracle__slips.jsonl": 6,
        "noop__ref.jsonl": 6,
    }
    assert sorted(p.name for p in archive.iterdir()) == [
        "noop__ref.000.jsonl.xz",
        "oracle__ref.000.jsonl.xz",
        "oracle__slips.000.jsonl.xz",
    ]
    assert b"half-writ" not in lzma.decompress((archive / "oracle__ref.000.jsonl.xz").read_bytes())
    assert sum(driver.pack(study, archive).values()) == 0  # nothing new: no new chunk
    assert len(list(archive.iterdir())) == 3

    # session 2, another machine: only the archive travels
    shutil.rmtree(out)
    assert sum(driver.unpack(study, archive).values()) == 18
    assert study_episodes(out) == first
    assert sum(driver.unpack(study, archive).values()) == 0  # idempotent
    outcome = run_study(study, resume=True, progress=False)
    assert (outcome.skipped, outcome.written) == (18, 18)
    assert driver.pack(study, archive)["oracle__ref.jsonl"] == 6
    assert (archive / "oracle__ref.001.jsonl.xz").exists()

    # the resumed study equals an uninterrupted one, episode for episode
    straight = load_study(_smoke(tmp_path, "straight.yaml", "straight"))
    run_study(straight, progress=False, report=False)
    assert study_episodes(out) == study_episodes(straight.output_dir)

    # session 3: unpacking every chunk, over a machine that has a partial copy of its own
    (out / "runs" / "oracle__slips.jsonl").unlink()
    (out / "runs" / "noop__ref.jsonl").write_text(
        (out / "runs" / "noop__ref.jsonl").read_text("utf-8").splitlines(keepends=True)[0]
    )
    driver.unpack(study, archive)
    ids = _ids(out)
    assert len(ids) == len(set(ids)) == 36
    per, planned = driver.progress(study, archive)
    assert sum(per.values()) == sum(planned.values()) == 36


def test_interim_analyses_only_what_is_packed(tmp_path: Path) -> None:
    """The interim analysis reads the archive alone: episodes run but not packed are not in
    it, and its tables are scripts/study_tables.py's rendering of its analysis.json."""
    from flatscore.analysis.result import AnalysisResult

    study = load_study(_smoke(tmp_path))
    archive = tmp_path / "archive"
    run_study(study.model_copy(update={"trials": 1}), resume=True, report=False, progress=False)
    driver.pack(study, archive)
    run_study(study, resume=True, report=False, progress=False)  # trial 2: run, not packed
    out = tmp_path / "interim"
    assert driver.interim(study, archive, out) == (18, 18)
    # trial 2 packed for one arm only: left out, every arm's numbers cover the same episodes
    lines = (study.output_dir / "runs" / "oracle__ref.jsonl").read_bytes().splitlines(True)
    second = [ln for ln in lines if json.loads(ln)["trial"] == 1]
    assert len(second) == 6
    (archive / "oracle__ref.001.jsonl.xz").write_bytes(lzma.compress(b"".join(second)))
    result = AnalysisResult.model_validate_json((out / "analysis.json").read_text("utf-8"))
    assert result.episodes_read == 18
    assert result.settings.reference == study.analysis.reference
    assert (out / "summary.md").read_text("utf-8").startswith("# flatscore summary")
    tables = (out / "tables.md").read_text("utf-8")
    assert tables.startswith("<!-- scripts/study_tables.py: 18 episodes read -->")
    assert "#### S(K) and Gap(K)" in tables
    before = {name: (out / name).read_bytes() for name in ("analysis.json", "tables.md")}
    # the same balanced part (the extra trial-2 chunk is left out): the same bytes
    assert driver.interim(study, archive, out) == (18, 24)
    assert {name: (out / name).read_bytes() for name in before} == before


@pytest.mark.slow  # child processes: ~1 min on 2 loaded cores
def test_run_in_stages_with_a_deadline_then_the_report(tmp_path: Path) -> None:
    path = _smoke(tmp_path)
    study = load_study(path)
    archive = tmp_path / "docs" / "runs"
    # no time at all: nothing runs, nothing breaks
    assert driver.run_chunk(path, archive, hours=0) == 36
    # a deadline that stops the first stage almost at once (SIGINT, then SIGKILL)
    driver.run_chunk(path, archive, hours=1 / 3600)
    ids = _ids(study.output_dir) if (study.output_dir / "runs").exists() else []
    assert len(ids) == len(set(ids))
    # enough time: both trials, then the report, copied next to the archive
    assert driver.run_chunk(path, archive, hours=1) == 0
    ids = _ids(study.output_dir)
    assert len(ids) == len(set(ids)) == 36
    per, _ = driver.progress(study, archive)
    assert set(per.values()) == {3}  # every (run file, domain, trial) has its 3 tasks
    assert len(per) == 3 * 2 * 2
    for name in ("report.html", "summary.md", "analysis.json"):
        assert (archive.parent / name).exists()
    assert Counter(e.trial for e in read_episodes(study.output_dir / "runs" / "noop__ref.jsonl"))
    chunked = {json.loads(ln)["episode_id"] for ln in driver.archived_lines(archive, "noop__ref")}
    assert len(chunked) == 12


def test_trial_major_order_keeps_the_runners_order_within_a_trial(tmp_path: Path) -> None:
    study = load_study(_smoke(tmp_path))
    assert study.order == "domain"
    jobs = plan_study(study).jobs
    ordered = plan_study(study.model_copy(update={"order": "trial"})).jobs
    assert sorted(j.episode_id for j in ordered) == sorted(j.episode_id for j in jobs)
    assert [j.trial for j in ordered] == sorted(j.trial for j in jobs)
    assert [j.trial for j in jobs] != sorted(j.trial for j in jobs)  # domain-major before
    for trial in (0, 1):
        assert [j for j in ordered if j.trial == trial] == [j for j in jobs if j.trial == trial]


def test_balanced_keeps_what_every_arm_has(tmp_path: Path) -> None:
    study = load_study(_smoke(tmp_path))
    run_study(study, resume=True, report=False, progress=False)
    runs = [list(read_episodes(path)) for path in driver.run_files(study)]
    assert [len(r) for r in runs] == [12, 12, 12]
    assert driver.balanced(runs) == [e for r in runs for e in r]
    lacking = next(e for e in runs[1] if e.trial == 0)
    short = [
        runs[0],
        [e for e in runs[1] if e is not lacking],
        [e for e in runs[2] if e.trial == 0],
    ]
    kept = driver.balanced(short)
    assert len(kept) == 3 * 5  # trial 0 (6 per arm) less the one the second arm lacks
    key = (lacking.domain, lacking.task_id, lacking.trial)
    assert all((e.domain, e.task_id, e.trial) != key and e.trial == 0 for e in kept)
    assert [e.episode_id for e in kept] == [
        e.episode_id for run in short for e in run if e in kept
    ]  # the order of the run files, unchanged
    assert driver.balanced([]) == []


def test_bad_study_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "status", "--study", str(tmp_path / "missing.yaml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and len(done.stderr.strip().splitlines()) == 1


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


def test_repair_effect_pairs_the_repair_pass_with_the_same_trial(tmp_path: Path) -> None:
    """A main study of 2 trials and a repair pass of trial 0 on the `slips` arm and its
    reference: the effect uses the main study's trial 0 only, both models' `ref` kept apart,
    and is written next to the repair archive."""
    main_path = _smoke(tmp_path)
    data = yaml.safe_load(main_path.read_text("utf-8"))
    data.update(
        {
            "name": "smoke-repair",
            "output": "out-repair",
            "trials": 1,
            "models": [m for m in data["models"] if m["name"] == "oracle"],
            "repair": {"mode": "on", "channels": ["unknown_tool", "bad_arguments"]},
            "analysis": {"reference": "ref+repair", "bootstrap": 1000},
        }
    )
    repair_path = tmp_path / "repair.yaml"
    repair_path.write_text(yaml.safe_dump(data), "utf-8")
    archive, repair_archive = tmp_path / "archive", tmp_path / "repair" / "runs"
    for path, folder in ((main_path, archive), (repair_path, repair_archive)):
        study = load_study(path)
        run_study(study, resume=True, report=False, progress=False)
        driver.pack(study, folder)

    main_runs = [list(read_episodes(p)) for p in driver.run_files(load_study(main_path))]
    repair_runs = [list(read_episodes(p)) for p in driver.run_files(load_study(repair_path))]
    pairs = driver.repair_pairs(main_runs, repair_runs)
    assert Counter((e.model, e.arm) for e in pairs) == {
        ("oracle", "ref"): 6,
        ("oracle", "slips"): 6,
        ("oracle", "ref+repair"): 6,
        ("oracle", "slips+repair"): 6,
    }
    assert {e.trial for e in pairs} == {0}
    lacking = repair_runs[1][0]  # a repaired episode one arm lacks drops its key everywhere
    short = driver.repair_pairs(main_runs, [repair_runs[0], repair_runs[1][1:]])
    assert len(short) == 4 * 5
    assert all((e.domain, e.task_id) != (lacking.domain, lacking.task_id) for e in short)

    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "repair-effect",
            "--study",
            str(main_path),
            "--archive",
            str(archive),
            "--repair-study",
            str(repair_path),
            "--repair-archive",
            str(repair_archive),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "repair" / "repair-effect.json").read_text("utf-8"))
    (cell,) = [c for c in result["cells"] if c["domain"] == "retail"]
    arms = {a["arm"]: a for a in cell["arms"]}
    assert set(arms) == {"ref", "slips"}
    assert arms["slips"]["interaction"] is not None
    assert "| slips |" in (tmp_path / "repair" / "repair-effect.md").read_text("utf-8")
