"""`python -m benchmarks real-failures` on a few replications of study v3's reference: the
drawn studies are what the conditions say, a degenerate null (the same episodes on both
sides) is cleared without a false finding, the in-process analysis is the CLI's, and a run
resumes from its outcomes file."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from benchmarks import harness
from benchmarks.real_failures import (
    CONDITIONS,
    REFERENCE,
    AnalysisFlags,
    Outcome,
    Pools,
    analyze_like_the_cli,
    build_pools,
    draw_study,
    outcomes_of,
    replication_rng,
    write_runs,
)
from cli_runner import flatscore


@pytest.fixture(scope="module")
def pools() -> Pools:
    """Study v3's reference only (the cheapest archive read: 456 episodes)."""
    return build_pools([CONDITIONS["identical"], CONDITIONS["null-v3-split"]])


def test_a_split_gives_each_side_one_of_a_drawn_tasks_trials_under_its_own_task_id(
    pools: Pools,
) -> None:
    pool = pools[("null-v3-split", "telecom")]
    assert len(pool) == 114
    episodes = draw_study(CONDITIONS["null-v3-split"], pool, replication_rng(0, "x", "y", 0))
    arms = Counter(ep.arm for ep in episodes)
    assert arms == {REFERENCE: 114, "ref-split": 114}
    slots: dict[str, list[str]] = {}
    for ep in episodes:
        assert ep.trial == 0 and ep.study == "real-failures"
        assert "task_rank" not in ep.metadata and "stopping" not in ep.metadata
        slots.setdefault(ep.task_id, []).append(ep.episode_id.split("@")[0])
    assert len(slots) == 114  # drawn twice: two tasks
    for task, originals in slots.items():
        assert len(originals) == 2 and originals[0] != originals[1], task  # the 2 trials
    sources = Counter(task.split("@")[0] for task in slots)
    assert max(sources.values()) > 1  # with replacement


def test_draws_are_reproducible_and_differ_between_replications(pools: Pools) -> None:
    pool = pools[("identical", "retail")]
    condition = CONDITIONS["identical"]
    first = draw_study(condition, pool, replication_rng(0, "identical", "retail", 0))
    again = draw_study(condition, pool, replication_rng(0, "identical", "retail", 0))
    other = draw_study(condition, pool, replication_rng(0, "identical", "retail", 1))
    assert [e.episode_id for e in first] == [e.episode_id for e in again]
    assert [e.episode_id for e in first] != [e.episode_id for e in other]


def test_the_in_process_analysis_is_what_flatscore_analyze_writes(
    pools: Pools, tmp_path: Path
) -> None:
    """The same study through `flatscore analyze DIR ... --json` in a fresh interpreter."""
    flags = AnalysisFlags(bootstrap=100)
    episodes = draw_study(
        CONDITIONS["null-v3-split"],
        pools[("null-v3-split", "retail")],
        replication_rng(0, "null-v3-split", "retail", 3),
    )
    ours = analyze_like_the_cli(episodes, flags)
    write_runs(episodes, tmp_path / "runs")
    argv = flags.command().replace("RUNS", str(tmp_path / "runs")).split()[1:]
    argv[-1] = str(tmp_path / "analysis.json")
    done = flatscore(*argv)
    assert done.returncode == 0, done.stderr
    theirs = json.loads((tmp_path / "analysis.json").read_text(encoding="utf-8"))
    assert outcomes_of(theirs, "retail") == outcomes_of(ours, "retail")
    assert theirs["cells"] == ours["cells"]


def test_two_replications_of_a_degenerate_null_flag_nothing_and_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "outcomes.jsonl"
    argv = ["--replications", "2", "--conditions", "identical", "--domains", "telecom"]
    argv += ["--bootstrap", "100", "--out", str(out)]
    (table,) = harness.run("real-failures", argv)
    assert table.header[:5] == ["condition", "domain", "tasks", "reps", "design"]
    rows = {row[4]: dict(zip(table.header, row, strict=True)) for row in table.rows}
    assert set(rows) == {"fixed", "sequential"}
    for row in rows.values():
        assert row["condition"] == "identical" and row["domain"] == "telecom"
        assert row["tasks"] == 114 and row["reps"] == 2
        assert row["false amplification"] == "0 %" and row["false damage"] == "0 %"
        assert row["damage verdict"] == "0 %"
        assert row["bad_arguments flagged"] == "—"  # not a planted pair
    assert rows["fixed"]['"no damage detected"'] == "100 %"
    lines = out.read_text(encoding="utf-8").splitlines()
    outcomes = [Outcome.model_validate_json(line) for line in lines]
    assert sorted(o.replication for o in outcomes) == [0, 1]
    assert all(o.fixed.verdict == "no damage detected" for o in outcomes)
    assert all(o.sequential is not None for o in outcomes)
    assert all(o.cpu_seconds is not None and o.cpu_seconds > 0 for o in outcomes)
    capsys.readouterr()

    (again,) = harness.run("real-failures", argv)  # resumes: nothing left to analyse
    assert "resuming: 2 outcomes" in capsys.readouterr().err
    assert again.rows == table.rows
    assert out.read_text(encoding="utf-8").splitlines() == lines


def test_a_bad_setting_stops_at_once_naming_its_flag() -> None:
    with pytest.raises(SystemExit) as stop:
        harness.run("real-failures", ["--bootstrap", "50"])
    assert "--bootstrap" in str(stop.value.code) and "100" in str(stop.value.code)
    with pytest.raises(SystemExit) as stop:
        harness.run("real-failures", ["--conditions", "null-v9"])
    assert "unknown ['null-v9']" in str(stop.value.code)
