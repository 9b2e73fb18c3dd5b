"""`stopping: sequential`: a decided arm stops while the others go on, the replay of the run
files decides as the run did, and a run killed and resumed decides exactly as the same run
uninterrupted (real `flatscore run` processes; the oracle with slips plays the arms)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from flatscore.analysis.sequential import SequentialDesign
from flatscore.run.driver import plan_study
from flatscore.run.sequential import SequentialPlan
from flatscore.run.study import load_study
from flatscore.store.jsonl import read_episodes
from run_files import SEQUENTIAL_STUDY

CLI = "from flatscore.cli import main; main()"


def _study(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "seq.yaml"
    path.write_text(SEQUENTIAL_STUDY, encoding="utf-8")
    return path


def _run(path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CLI, "run", str(path), "--no-progress", *extra],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _ids(folder: Path) -> dict[str, list[str]]:
    runs = folder / "out" / "runs"
    return {p.name: sorted(e.episode_id for e in read_episodes(p)) for p in runs.glob("*.jsonl")}


def _sequential(folder: Path) -> list[Any]:
    analysis = json.loads((folder / "out" / "analysis.json").read_text("utf-8"))
    return [(c["arm"], c["sequential"]) for cell in analysis["cells"] for c in cell["comparisons"]]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("uninterrupted")
    done = _run(_study(folder))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return folder


def test_a_decided_arm_stops_and_the_others_run_to_the_maximum(uninterrupted: Path) -> None:
    ids = _ids(uninterrupted)
    per_task = 2  # trials
    assert len(ids["oracle__ref.jsonl"]) == len(ids["oracle__same.jsonl"]) == 24 * per_task
    assert len(ids["oracle__slips.jsonl"]) in (6 * per_task, 12 * per_task, 18 * per_task)
    sequential = dict(_sequential(uninterrupted))
    assert sequential["slips"]["verdict"] == "visible damage" and sequential["slips"]["decided"]
    assert sequential["slips"]["tasks"] * per_task == len(ids["oracle__slips.jsonl"])
    assert sequential["slips"]["tasks_available"] == 24
    assert not sequential["same"]["decided"] and sequential["same"]["tasks"] == 24


def test_every_episode_records_its_place_in_the_design(uninterrupted: Path) -> None:
    study = load_study(uninterrupted / "seq.yaml")
    ranks = {}
    for path in (uninterrupted / "out" / "runs").glob("*.jsonl"):
        for ep in read_episodes(path):
            assert ep.metadata["stopping"] == "sequential"
            assert ep.metadata["sequential_max_tasks"] == 24
            ranks[ep.task_id] = ep.metadata["task_rank"]
    seq = SequentialPlan(plan_study(study).jobs, study.seed, SequentialDesign().looks)
    order = seq.cells[("oracle", "retail")].order
    assert ranks == {task: i for i, task in enumerate(order)}
    assert order != sorted(order)  # a seeded shuffle, not the split's order


def test_the_plan_batches_tasks_up_to_each_look(tmp_path: Path) -> None:
    plan = plan_study(load_study(_study(tmp_path)))
    seq = SequentialPlan(
        plan.jobs, seed=300, looks=SequentialDesign(first_look=8, look_every=8).looks
    )
    state = seq.cells[("oracle", "retail")]
    assert state.looks == [8, 16, 24]
    assert SequentialPlan(plan.jobs, 300, SequentialDesign().looks).cells[
        ("oracle", "retail")
    ].looks == [6, 12, 18, 24]  # the default design: every 6 from a quarter of 24
    first = seq.batch(0)
    assert {seq.rank(j) for j in first} == set(range(8))
    assert len(first) == 8 * 2 * 3  # tasks x trials x arms
    state.open_arms, state.reference = {"same"}, "ref"  # slips decided at the first look
    second = seq.batch(1)
    assert {j.arm for j in second} == {"ref", "same"}
    assert {seq.rank(j) for j in second} == set(range(8, 16))


@pytest.mark.slow  # killed and resumed end to end; fast: tests/run/test_sequential_looks.py
def test_a_killed_run_resumed_decides_as_the_uninterrupted_one(
    uninterrupted: Path, tmp_path: Path
) -> None:
    path = _study(tmp_path)
    ref = tmp_path / "out" / "runs" / "oracle__ref.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, "run", str(path), "--no-progress"],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if ref.exists() and ref.read_bytes().count(b"\n") >= 20:  # inside the second batch
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    resumed = _run(path, "--resume")
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert _ids(tmp_path) == _ids(uninterrupted)
    assert _sequential(tmp_path) == _sequential(uninterrupted)
