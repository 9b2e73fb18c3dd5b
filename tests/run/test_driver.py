"""`flatscore run study.yaml` end to end on the oracle/noop smoke study: paired runs, resume,
the report in the output folder, and `flatscore report` reproducing analysis.json byte for
byte from the logs alone."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from cli_runner import CliResult
from flatscore.errors import InputError
from flatscore.run.driver import plan_study, run_study
from flatscore.run.study import load_study
from flatscore.store.jsonl import read_episodes

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def smoke_file(tmp_path: Path, **changes: object) -> Path:
    """examples/smoke.yaml, smaller, writing under tmp_path."""
    data = yaml.safe_load((EXAMPLES / "smoke.yaml").read_text("utf-8"))
    data.update({"output": "out", "tasks_per_domain": 3, "trials": 2}, **changes)
    path = tmp_path / "smoke.yaml"
    path.write_text(yaml.safe_dump(data), "utf-8")
    return path


def test_plan_is_paired_and_interleaved(tmp_path: Path) -> None:
    study = load_study(smoke_file(tmp_path, repair="both"))
    plan = plan_study(study)
    labels = [(r.model, r.arm) for r in plan.runs]
    assert labels == [
        ("oracle", "ref"),
        ("oracle", "ref+repair"),
        ("oracle", "slips"),
        ("oracle", "slips+repair"),
        ("noop", "ref"),
        ("noop", "ref+repair"),
    ]
    assert len(plan.jobs) == 6 * 2 * 3 * 2  # runs × domains × tasks × trials
    assert len({j.episode_id for j in plan.jobs}) == len(plan.jobs)
    coords: dict[tuple[str, str], set[tuple[str, str, int, int]]] = defaultdict(set)
    for j in plan.jobs:
        coords[(j.agent.label, j.arm)].add((j.domain, j.task_id, j.trial, j.seed))
    assert len({frozenset(c) for c in coords.values()}) == 1  # every arm: the same episodes
    assert {j.seed for j in plan.jobs} == {300, 301}  # trial t → seed + t
    assert [j.arm for j in plan.jobs[:6]] == [r.arm for r in plan.runs]  # arms interleaved


def test_cli_run_study_writes_the_folder_and_report_reproduces_it(
    tmp_path: Path, flatscore: Callable[..., CliResult]
) -> None:
    path = smoke_file(tmp_path)
    done = flatscore("run", path, "--no-progress")
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    # 3 tasks: too few to show amplification or equivalence (docs/analysis.md)
    assert "oracle · retail: inconclusive" in done.stdout
    assert f"report: {out / 'report.html'}" in done.stdout.replace("\n", "")
    runs = sorted(p.name for p in (out / "runs").glob("*.jsonl"))
    assert runs == ["noop__ref.jsonl", "oracle__ref.jsonl", "oracle__slips.jsonl"]
    for name in ("report.html", "summary.md", "analysis.json", "study.json"):
        assert (out / name).is_file()
    episodes = list(read_episodes(out / "runs" / "oracle__slips.jsonl"))
    assert len(episodes) == 2 * 3 * 2
    assert {e.model for e in episodes} == {"oracle"} and {e.arm for e in episodes} == {"slips"}
    assert {e.error_budget.max_errors for e in episodes} == {10}

    # From the logs alone, with the study's settings: the same bytes.
    again = flatscore(
        "report",
        out,
        "--out",
        tmp_path / "again",
        "--settings-from",
        out / "analysis.json",
        "--title",
        "flatscore · smoke",
    )
    assert again.returncode == 0, again.stderr
    for name in ("analysis.json", "summary.md", "report.html"):
        assert (tmp_path / "again" / name).read_bytes() == (out / name).read_bytes(), name

    # Rerunning refuses to append; --resume runs nothing new and rewrites the same report.
    refused = flatscore("run", path, "--no-progress")
    assert refused.returncode == 2 and "pass --resume" in refused.stderr
    before = (out / "analysis.json").read_bytes()
    resumed = flatscore("run", path, "--no-progress", "--resume")
    assert resumed.returncode == 0 and "0 episodes run, 36 already there" in resumed.stdout
    assert (out / "analysis.json").read_bytes() == before


def test_default_settings_reproduce_without_settings_from(
    tmp_path: Path, flatscore: Callable[..., CliResult]
) -> None:
    """A study with default analysis settings: plain `flatscore report DIR` is enough."""
    path = smoke_file(tmp_path, analysis={}, tasks_per_domain=2, trials=1)
    outcome = run_study(load_study(path), progress=False)
    assert outcome.report is not None
    done = flatscore("report", outcome.output, "--out", tmp_path / "plain")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "plain" / "analysis.json").read_bytes() == (
        outcome.report.analysis.read_bytes()
    )


def test_resume_after_a_kill_runs_only_the_missing_episodes(tmp_path: Path) -> None:
    study = load_study(smoke_file(tmp_path, trials=1))
    first = run_study(study, progress=False, report=False)
    run_file = tmp_path / "out" / "runs" / "oracle__ref.jsonl"
    lines = run_file.read_text("utf-8").splitlines(keepends=True)
    run_file.write_text("".join(lines[:-3]) + lines[-3][:40], "utf-8")  # a kill mid-write
    resumed = run_study(study, resume=True, progress=False, report=False)
    assert (resumed.written, resumed.skipped) == (3, first.planned - 3)
    ids = [e.episode_id for e in read_episodes(run_file)]
    assert len(ids) == len(set(ids)) == len(lines)


def test_repair_factor_runs_both_levels(tmp_path: Path) -> None:
    path = smoke_file(
        tmp_path, repair={"mode": "both", "attempts": 2}, tasks_per_domain=1, trials=1
    )
    outcome = run_study(load_study(path), progress=False)
    runs = tmp_path / "out" / "runs"
    repaired = list(read_episodes(runs / "oracle__slips+repair.jsonl"))
    assert {e.arm for e in repaired} == {"slips+repair"}
    assert all(e.metadata["repair"]["attempts"] == 2 for e in repaired)
    assert not any("repair" in e.metadata for e in read_episodes(runs / "oracle__slips.jsonl"))
    assert outcome.analysis is not None
    arms = {a.arm for c in outcome.analysis.cells for a in c.arms}
    assert {"ref", "ref+repair", "slips", "slips+repair"} <= arms


def test_cli_errors_are_one_line(tmp_path: Path, flatscore: Callable[..., CliResult]) -> None:
    path = smoke_file(tmp_path)
    mixed = flatscore("run", path, "--domain", "retail")
    assert mixed.returncode == 2 and "--domain: for the quick form only" in mixed.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("models: [{name: x, kind: agent, agent: oracle, arms: [ref]}]\ntrials: 0\n")
    wrong = flatscore("run", bad)
    assert wrong.returncode == 2 and "field 'trials'" in wrong.stderr
    assert wrong.stderr.count("\n") == 1 and "Traceback" not in wrong.stderr
    study_only = flatscore("run", "--out", tmp_path / "x.jsonl", "--executor", "ray")
    assert study_only.returncode == 2 and "--executor: for a study file only" in study_only.stderr
    no_out = flatscore("run")
    assert no_out.returncode == 2 and "--out" in no_out.stderr


def test_empty_selection_is_an_input_error(tmp_path: Path) -> None:
    study = load_study(smoke_file(tmp_path, task_ids=["nope"]))
    with pytest.raises(InputError, match="selects no tasks"):
        plan_study(study)


@pytest.mark.slow  # 60 episodes; study v3's ref-control rebuilds in the fast suite
def test_a_negative_control_replicates_the_reference_and_comes_out_clean(
    tmp_path: Path,
) -> None:
    """`control_of: ref` runs the reference's own agent (the oracle with random slips) under
    another seed base; analysed as an arm and labelled a control, it shows no damage and
    its name diagnostics sit inside the reference's noise floor. (30 tasks × 2 trials do not
    show equivalence within ±7.5 points — TOST p = 0.059 here — so the verdict may be
    "inconclusive": never a damage verdict.)"""
    path = smoke_file(
        tmp_path,
        models=[
            {
                "name": "oracle",
                "kind": "agent",
                "agent": "oracle",
                "arms": {
                    "ref": {"options": {"slip_rate": 0.3}},
                    "ref-control": {"control_of": "ref"},
                },
            }
        ],
        domains=["retail"],
        tasks_per_domain=30,  # the bootstrap's minimum: intervals against the floor
        trials=2,
    )
    study = load_study(path)
    plan = plan_study(study)
    seeds = {(j.arm, j.trial): j.seed for j in plan.jobs}
    assert seeds[("ref", 1)] == study.seed + 1 and seeds[("ref-control", 1)] == study.seed + 10_001
    control = next(r for r in plan.runs if r.arm == "ref-control")
    assert control.recipe.options == {"slip_rate": 0.3} and control.recipe.control_of == "ref"
    outcome = run_study(study, progress=False)
    assert outcome.analysis is not None
    (cell,) = outcome.analysis.cells
    assert cell.reference == "ref"
    by_arm = {c.arm: c for c in cell.comparisons}
    c = by_arm["ref-control"]
    assert c.control_of == "ref"
    assert c.verdict in ("no damage detected", "inconclusive"), c.verdict_reason
    assert not c.significant and not c.amplified_channels
    assert c.gap_growth.ci_low is None or c.gap_growth.ci_low <= 0
    assert c.noise_floor is not None and c.noise_floor.invariance == "not beyond the noise floor"
    summary = (tmp_path / "out" / "summary.md").read_text("utf-8")
    assert "(negative control (a replicate of ref with another seed base))" in summary
    episodes = list(read_episodes(tmp_path / "out" / "runs" / "oracle__ref-control.jsonl"))
    assert {e.metadata["control_of"] for e in episodes} == {"ref"}


@pytest.mark.parametrize(
    ("arms", "message"),
    [
        ({"ref": {}, "c": {"control_of": "nope"}}, "control_of must name another"),
        ({"ref": {}, "c": {"control_of": "c"}}, "control_of must name another"),
        ({"ref": {}, "c": {"control_of": "ref", "options": {"slip_rate": 1}}}, "as it is"),
        ({"ref": {"seed_base": 5}}, "seed_base applies to control arms only"),
    ],
)
def test_bad_control_arms_are_one_line_errors(
    tmp_path: Path, arms: dict[str, object], message: str
) -> None:
    path = smoke_file(
        tmp_path, models=[{"name": "o", "kind": "agent", "agent": "oracle", "arms": arms}]
    )
    with pytest.raises(InputError) as err:
        load_study(path)
    assert message in err.value.message and "models.0" in str(err.value)
