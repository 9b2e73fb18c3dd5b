"""The card's evaluation from `flatscore run` files: recovery and S(K) as the analysis
defines them (known answers), planted failures counted apart, and the scope against the
study that planned the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis_builders import episode
from flatscore.cli.embedded_card_runs import recovery_table, runs_section
from flatscore.episode import Episode
from flatscore.errors import InputError
from flatscore.store.jsonl import EpisodeWriter
from flatscore.train.card_runs import cells, read_runs

OK, MISSING = ("get_order", "ok"), ("get_order", "entity_not_found")


def _ref(max_errors: int = 30) -> list[Episode]:
    """Four retail tasks, one trial each:
    t1: a failure, then a success (recovered); succeeds with 1 failure.
    t2: two failures, then a success (the second recovered); fails.
    t3: no failure; succeeds.
    t4: a failure and no later call (not recovered); succeeds with 1 failure."""
    return [
        episode("ref", "t1", calls=[MISSING, OK], max_errors=max_errors),
        episode(
            "ref", "t2", calls=[("x", "invented"), ("x", "invented"), OK], success=False,
            max_errors=max_errors,
        ),
        episode("ref", "t3", calls=[OK], max_errors=max_errors),
        episode("ref", "t4", calls=[OK, ("cancel_order", "precondition")], max_errors=max_errors),
    ]  # fmt: skip


def test_recovery_and_budget_known_answer() -> None:
    [c] = cells(_ref()).values()
    s = c.stats
    assert (s.failed_agent_calls, s.recovered_calls) == (4, 2)
    assert s.recovery_rate == pytest.approx(0.5)
    assert (c.succeeded_with_failure, s.episodes_with_failure) == (2, 3)
    curve = {p.K: p.success_rate for p in s.budget_curve}
    assert curve == pytest.approx({0: 0.25, 2: 0.75, 9: 0.75})
    table = recovery_table(_ref())
    assert "| ref | retail | 4 | 4 | – | 2 (50.0%) | 2 of 3 | 25.0 | 75.0 | 75.0 | 50.0 |" in table


def test_recovery_is_the_analysis_task_weighted_rate() -> None:
    """Task a: two trials, 2 failed calls (1 recovered) and 0; task b: 1 failed, recovered.
    Task-weighted: (0.5 + 1) / (1 + 1) = 0.75; pooled it would be 2/3."""
    from flatscore.analysis.analyze import analyze

    episodes = [
        episode("ref", "a", 0, [MISSING, MISSING, OK]),
        episode("ref", "a", 1, [OK]),
        episode("ref", "b", 0, [MISSING, OK]),
    ]
    [c] = cells(episodes).values()
    assert c.stats.recovery_rate == pytest.approx(0.75)
    [arm] = analyze(episodes).cells[0].arms
    assert c.stats.recovery_rate == arm.recovery_rate


def test_a_budget_the_run_cut_is_a_lower_bound() -> None:
    """Recorded with max_errors 5: S(9) is not recomputable (an episode cut at 5 failures
    might have succeeded later), so it is marked and S(9) − S(0) is not given."""
    table = recovery_table(_ref(max_errors=5))
    assert "| 25.0 | 75.0 | ≥ 75.0 | – |" in table


def test_planted_failures_are_counted_apart() -> None:
    injected = {"injected": {"base": "ref", "changes": [{"call_id": "c0"}, {"call_id": "c1"}]}}
    planted = episode("ref-planted", "t1", calls=[MISSING, OK], extra_args={"metadata": injected})
    [c] = cells([planted]).values()
    assert (c.planted, c.planted_failed) == (2, 1)  # c1 was perturbed but did not fail


def _write(folder: Path, name: str, episodes: list[Episode]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with EpisodeWriter(folder / name) as writer:
        for e in episodes:
            writer.write(e)


def test_scope_against_the_study(tmp_path: Path) -> None:
    study = tmp_path / "study.yaml"
    models = {
        "name": "m",
        "kind": "embedded",
        "sampling": {"temperature": 0.5},
        "arms": {"ref": {}, "ref-planted": {"inject": {"base": "ref", "drop_argument": 0.1}}},
    }
    spec = {
        "name": "s",
        "models": [models],
        "domains": ["retail", "telecom"],
        "split": "test",
        "task_ids": ["cancel_00", "status_00", "airplane_05"],
    }
    study.write_text(json.dumps(spec))  # JSON is YAML
    runs = tmp_path / "runs"
    _write(runs, "m__ref.jsonl", [episode("ref", "cancel_00", calls=[OK])])
    text = "\n".join(runs_section(runs, study))
    assert "sampling temperature 0.5, top-p 1, at most 256 tokens" in text
    assert "`ref-planted` = `ref` with damage planted" in text and "drop_argument p = 0.1" in text
    assert "`ref` · retail: 1 of 2 planned episodes (stopped before the end)." in text
    assert "`ref` · telecom: 0 of 1 planned episodes (not run)." in text
    assert "| ref | retail | 1 | 0 | – | – | 0 of 0 | 100.0 | 100.0 | 100.0 | 0.0 |" in text

    _write(runs, "m__int4.jsonl", [episode("int4", "cancel_00")])
    with pytest.raises(InputError, match="does not plan \\(int4 · retail\\)"):
        runs_section(runs, study)


def test_a_folder_without_runs_is_one_line_naming_it(tmp_path: Path) -> None:
    """The same lines as every command that reads a run folder (`archive.run_files`,
    `formats.load_runs`)."""
    with pytest.raises(InputError) as info:
        read_runs(tmp_path / "nope")
    assert str(info.value) == f"{tmp_path / 'nope'}: not a run folder (no such folder)"
    with pytest.raises(InputError) as info:
        read_runs(tmp_path)
    assert str(info.value) == f"{tmp_path}: not a run folder: no run files (*.jsonl) in it"
    (tmp_path / "m__ref.jsonl").write_text("", "utf-8")
    with pytest.raises(InputError) as info:
        read_runs(tmp_path)
    assert str(info.value) == f"{tmp_path / 'm__ref.jsonl'}: no episodes in the input"
