"""`flatscore power --sequential` (`analysis.sequential_power`): the coupling read from a
pilot (known answers, and recovered from a simulated pilot), the expected tasks to a decision
falling as the gap grows, and the command line on a pilot's run files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analysis_builders import episode
from cli_runner import flatscore
from flatscore.analysis.sequential_power import (
    CoupledPair,
    Pilot,
    estimate_coupling,
    pilot_from_episodes,
    sequential_power,
)
from sequential_model import simulate


def test_coupling_known_answers() -> None:
    same = np.array([1.0, 0.5, 0.0, 0.75])
    assert estimate_coupling(same, same, 4) == 1.0
    assert estimate_coupling(np.array([1.0, 0.0]), np.array([0.0, 1.0]), 1) == 0.0  # clipped
    # d = (0.5, 0) less its mean: ±0.25; q = (0.75, 0.5): 1 − 2·0.0625 / 0.4375
    got = estimate_coupling(np.array([1.0, 0.5]), np.array([0.5, 0.5]), 2)
    assert got == pytest.approx(1 - 2 * 0.0625 / 0.4375)
    assert estimate_coupling(np.ones(3), np.ones(3), 2) == 0.0  # nothing varies


@pytest.mark.parametrize("coupling", [0.0, 0.75])
def test_coupling_is_recovered_from_a_simulated_pilot(coupling: float) -> None:
    c = simulate(np.random.default_rng(8), 40, 0.0, 0.6, coupling, tasks=114, trials=4)
    got = [estimate_coupling(c.success_ref[i], c.success_arm[i], 4) for i in range(40)]
    assert float(np.mean(got)) == pytest.approx(coupling, abs=0.08)


def _pilot(coupling: float) -> Pilot:
    c = simulate(np.random.default_rng(9), 1, 0.0, 0.6, coupling, tasks=114, trials=4)
    return Pilot(
        success=list(c.success_ref[0]),
        failure_rate=list(c.failed_ref[0] / c.calls_ref[0]),
        calls=list(c.calls_ref[0]),
        trials=4,
        coupling=coupling,
    )


def test_expected_tasks_fall_as_the_gap_grows() -> None:
    result = sequential_power(
        _pilot(0.75), [0.0, 0.1, 0.2, 0.3], max_tasks=114, simulations=400, seed=1
    )
    rows = result.rows
    damage = [r.verdicts["visible damage"] for r in rows]
    tasks = [r.mean_tasks for r in rows]
    assert damage[0] <= 0.05 and damage[2] >= 0.95
    assert damage == sorted(damage)
    assert tasks[1] > tasks[2] > tasks[3]
    assert rows[0].verdicts["no damage detected"] >= 0.8  # coupled, no gap
    assert all(r.mean_episodes == pytest.approx(2 * 4 * r.mean_tasks) for r in rows)
    again = sequential_power(_pilot(0.75), [0.0], max_tasks=114, simulations=400, seed=1)
    assert again.rows[0] == rows[0]


def test_independent_trials_need_more_tasks_than_coupled() -> None:
    coupled = sequential_power(_pilot(0.75), [0.0], max_tasks=114, simulations=300, seed=2)
    independent = sequential_power(_pilot(0.0), [0.0], max_tasks=114, simulations=300, seed=2)
    assert independent.rows[0].mean_tasks > coupled.rows[0].mean_tasks


def _pilot_file(tmp_path: Path) -> Path:
    rng = np.random.default_rng(3)
    lines = []
    for t in range(24):
        q = rng.uniform(0.2, 0.9)
        for trial in range(2):
            u = rng.random()
            for arm, ok in (("ref", u < q), ("q", (u if rng.random() < 0.7 else rng.random()) < q)):
                calls = [("get_user", "fail")] * int(rng.integers(0, 3)) + [("get_user", "ok")] * 4
                ep = episode(arm, f"t{t:02d}", trial, calls, success=bool(ok))
                lines.append(ep.model_dump_json() + "\n")
    path = tmp_path / "pilot.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    return path


def test_pilot_from_run_files(tmp_path: Path) -> None:
    from flatscore.formats import load_runs

    eps = list(load_runs([_pilot_file(tmp_path)]))
    pilot = pilot_from_episodes(eps, reference="ref")
    assert len(pilot.success) == 24 and pilot.trials == 2
    assert 0.0 <= pilot.coupling <= 1.0
    assert pilot.coupled == CoupledPair(arm="q", reference="ref", model="m", domain="retail")
    assert all(0 <= r <= 1 for r in pilot.failure_rate) and all(c >= 4 for c in pilot.calls)
    alone = pilot_from_episodes([e for e in eps if e.arm == "ref"], reference="ref")
    assert alone.coupling == 0.0 and alone.coupled is None


def test_the_command_line(tmp_path: Path) -> None:
    path = _pilot_file(tmp_path)
    proc = flatscore(
        "power", "--sequential", "--pilot", path, "--reference", "ref", "--gaps", "0,20",
        "--max-tasks", "48", "--simulations", "100",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "expected tasks" in proc.stdout and "up to 48 tasks × 2 trial(s)" in proc.stdout
    assert "coupling: q against ref in m / retail; 100 simulated studies per gap" in proc.stdout
    bad = flatscore("power", "--sequential", "--gaps", "0,5")
    assert bad.returncode == 2 and "--pilot" in bad.stderr and "Traceback" not in bad.stderr
    gaps = flatscore("power", "--sequential", "--pilot", path, "--gaps", "five")
    assert gaps.returncode == 2 and "--gaps" in gaps.stderr
