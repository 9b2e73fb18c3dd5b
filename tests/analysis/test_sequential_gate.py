"""`flatscore gate --sequential` (`analysis.sequential_gate`) on synthetic runs written task by
task (tests/sequential_model.py): damage stops early with exit 3, a flat coupled candidate
passes before the maximum, and a run short of the design's maximum is open with the tasks
its planned looks still allow."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis_builders import episode
from cli_runner import flatscore
from flatscore.analysis.gate import GateResult
from flatscore.episode import Episode
from flatscore.formats.pipeline import gate_labelled
from flatscore.report.gate_text import worded_gate
from sequential_model import simulate


def sequential_gate(*runs: list[Episode], max_tasks: int | None = None) -> GateResult:
    """The sequential gate's result as the command gives it: decided, then worded."""
    ref, cand = ([(None, e) for e in run] for run in runs)
    return worded_gate(gate_labelled(ref, cand, sequential=True, max_tasks=max_tasks))


def _runs(gap: float, seed: int, tasks: int = 114, trials: int = 4) -> tuple[list, list]:
    c = simulate(np.random.default_rng(seed), 1, gap, 0.9, 0.75, 1.0, tasks=tasks, trials=trials)
    runs: dict[str, list[Episode]] = {"ref": [], "q": []}
    sides = (("ref", c.outcomes_ref, c.failures_ref), ("q", c.outcomes_arm, c.failures_arm))
    for arm, ok, failed in sides:
        for t in range(tasks):
            for trial in range(trials):
                f = int(failed[0, t, trial])
                calls = [("get_user", "fail")] * f + [("get_user", "ok")] * (c.calls - f)
                runs[arm].append(
                    episode(arm, f"t{t:03d}", trial, calls, success=bool(ok[0, t, trial]))
                )
    return runs["ref"], runs["q"]


def test_damage_and_pass_are_decided_before_the_maximum() -> None:
    ref, cand = _runs(0.2, 1)
    damage = sequential_gate(ref, cand)
    assert damage.verdict == "damage" and damage.exit_code == 3
    assert "decided after" in damage.summary
    ref, cand = _runs(0.0, 2)
    flat = sequential_gate(ref, cand)
    assert flat.verdict == "pass" and flat.exit_code == 0, flat.summary
    assert "no damage detected, decided after" in flat.cells[0].reason


def test_a_run_short_of_its_maximum_is_open() -> None:
    ref, cand = _runs(0.0, 3, tasks=34, trials=1)
    result = sequential_gate(ref, cand, max_tasks=114)
    assert result.verdict == "inconclusive" and result.exit_code == 4
    assert "open after 30 tasks: the planned looks allow 84 more" in result.summary
    early = sequential_gate(*_runs(0.0, 3, tasks=20, trials=1), max_tasks=114)
    assert "open: no planned look yet (the first at 30 tasks)" in early.summary


def test_the_cli_exit_code(tmp_path: Path) -> None:
    ref, cand = _runs(0.2, 4, tasks=48, trials=2)
    paths = []
    for name, eps in (("ref", ref), ("cand", cand)):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(e.model_dump_json() + "\n" for e in eps), encoding="utf-8")
        paths.append(path)
    proc = flatscore("gate", *paths, "--sequential", "--bootstrap", "100")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "sequential" in proc.stdout and "decided after" in proc.stdout
