"""`flatscore analyze --sequential` (`analysis.sequential_replay`): synthetic studies written
task by task (tests/sequential_model.py) and read back through the CLI decide exactly as the
sequential procedure does on the same per-task numbers (whose rates the seeded simulation in
test_sequential.py measures); task order as episodes finished in a sequential run, a seeded
random order otherwise; without the flag, no `sequential` anywhere."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from analysis_builders import episode
from cli_runner import flatscore
from flatscore.analysis.analyze import analyze
from flatscore.analysis.notices import Notice
from flatscore.analysis.sequential import VERDICTS, SequentialDesign, decide, look_stats
from flatscore.analysis.settings import AnalysisSettings
from flatscore.analysis.stats import stable_rng
from flatscore.episode import Episode, Timing
from sequential_model import recorded_run, simulate

TASKS, TRIALS = 48, 2
CONDITIONS = {  # model (one cell each) → (gap, success, coupling, failure ratio)
    "gap20": (0.2, 0.6, 0.0, 1.0),
    "flat": (0.0, 0.9, 0.75, 1.0),
    "amplified": (0.0, 0.9, 0.75, 2.0),
    "margin": (0.075, 0.6, 0.75, 1.0),
}
START = datetime(2026, 1, 1, tzinfo=UTC)


def _episodes(sequential: bool, seed: int = 11) -> tuple[list[Episode], dict[str, list[int]]]:
    """One study per model (reference `ref`, arm `q`); in a sequential run task i of the
    model's finish order finished at minute i, and the file lists tasks in another order."""
    rng = np.random.default_rng(seed)
    out: list[Episode] = []
    finish: dict[str, list[int]] = {}
    for model, (gap, s, coupling, ratio) in CONDITIONS.items():
        c = simulate(rng, 1, gap, s, coupling, ratio, tasks=TASKS, trials=TRIALS)
        order = list(rng.permutation(TASKS)) if sequential else list(range(TASKS))
        finish[model] = [int(t) for t in order]
        for t in range(TASKS):
            minute = order.index(t)
            for arm, ok, failed in (
                ("ref", c.outcomes_ref, c.failures_ref),
                ("q", c.outcomes_arm, c.failures_arm),
            ):
                for trial in range(TRIALS):
                    f = int(failed[0, t, trial])
                    calls = [("get_user", "fail")] * f + [("get_user", "ok")] * (c.calls - f)
                    ep = episode(
                        arm, f"t{t:03d}", trial, calls, success=bool(ok[0, t, trial]), model=model
                    )
                    if sequential:
                        end = (START + timedelta(minutes=minute, seconds=trial)).isoformat()
                        ep = ep.model_copy(
                            update={
                                "metadata": {"stopping": "sequential"},
                                "timing": Timing(ended_at=end),
                            }
                        )
                    out.append(ep)
    out.reverse()  # the file's order is not the finish order
    return out, finish


def _expected(order_of: dict[str, list[int]], eps: list[Episode]) -> dict[str, tuple]:
    """The procedure run directly on the per-task numbers in the given task orders."""
    design = SequentialDesign()
    stats, models = [], []
    for model, order in order_of.items():
        mine = [e for e in eps if e.model == model]

        def per_task(arm: str, value, mine=mine, order=order) -> np.ndarray:
            out = np.zeros(TASKS)
            for e in mine:
                if e.arm == arm:
                    out[int(e.task_id[1:])] += value(e) / TRIALS
            return out[order]

        def failed(e: Episode) -> float:
            return sum(1 for m in e.messages if m.tool_result and m.tool_result.error)

        def calls(e: Episode) -> float:
            return sum(len(m.tool_calls) for m in e.messages)

        def won(e: Episode) -> float:
            return float(e.reward == 1.0)

        d = per_task("ref", won) - per_task("q", won)
        stats.append(
            look_stats(
                d,
                per_task("q", failed),
                per_task("q", calls),
                per_task("ref", failed),
                per_task("ref", calls),
                design,
            )
        )
        models.append(model)
    dec = decide(stats, design)
    tasks = dec.tasks([s.counts for s in stats])
    return {
        m: (VERDICTS[int(v)], bool(x), int(n))
        for m, v, x, n in zip(models, dec.verdict, dec.decided, tasks, strict=True)
    }


def _run(tmp_path: Path, eps: list[Episode], *flags: str) -> dict:
    runs = tmp_path / "runs.jsonl"
    runs.write_text("".join(e.model_dump_json() + "\n" for e in eps), encoding="utf-8")
    out = tmp_path / "analysis.json"
    proc = flatscore("analyze", runs, "--bootstrap", "100", "--json", out, *flags)
    assert proc.returncode == 0, proc.stderr
    return {"json": json.loads(out.read_text("utf-8")), "stdout": proc.stdout}


def _got(result: dict) -> dict[str, tuple]:
    return {
        cell["model"]: (s["verdict"], s["decided"], s["tasks"])
        for cell in result["cells"]
        for s in [cell["comparisons"][0]["sequential"]]
    }


def test_a_sequential_run_is_read_in_finish_order_through_the_cli(tmp_path: Path) -> None:
    eps, finish = _episodes(sequential=True)
    result = _run(tmp_path, eps, "--sequential")
    got, expected = _got(result["json"]), _expected(finish, eps)
    assert got == expected
    assert got["gap20"][0] == "visible damage"
    assert got["amplified"][0] in ("flat score, amplified failures", "inconclusive")
    assert "order their episodes finished" in result["json"]["sequential"]["order"]
    for cell in result["json"]["cells"]:
        s = cell["comparisons"][0]["sequential"]
        assert s["tasks_available"] == TASKS
        assert s["episodes"] == 2 * TRIALS * s["tasks"]
    summary = result["json"]["sequential"]
    assert summary["tasks"] == sum(v[2] for v in got.values())
    assert summary["episodes"] == 2 * TRIALS * summary["tasks"]
    assert summary["saving"] == pytest.approx(1 - summary["tasks"] / (len(CONDITIONS) * TASKS))
    assert "decided after" in result["stdout"] or "undecided after" in result["stdout"]
    assert "paired tasks and" in result["stdout"]


def test_other_runs_are_read_in_a_seeded_random_order() -> None:
    eps, _ = _episodes(sequential=False)
    settings = AnalysisSettings(bootstrap=100, sequential=True, seed=3)
    result = analyze(eps, settings)
    order = {
        m: [int(i) for i in stable_rng(3, "sequential", m, "retail").permutation(TASKS)]
        for m in CONDITIONS
    }
    got = {
        c.model: (s.verdict, s.decided, s.tasks)
        for c in result.cells
        for s in [c.comparisons[0].sequential]
        if s is not None
    }
    assert got == _expected(order, eps)
    assert result.sequential is not None and result.sequential.ordered_by == "seeded"
    assert analyze(eps, settings) == result  # reproducible


def test_without_the_flag_nothing_sequential_is_written() -> None:
    eps, _ = _episodes(sequential=True)
    text = analyze(eps, AnalysisSettings(bootstrap=100)).model_dump_json()
    assert "sequential" not in text


def _stopped_run(sequential: bool) -> list[Episode]:
    """A run where arm `early` stopped after 16 of 48 tasks and arm `late` ran all 48 (as
    a sequential run leaves them); `late` drops in every task, `early` never."""
    out = []
    for t in range(48):
        for trial in range(2):
            for arm, ok in (("ref", True), ("late", trial == 0), ("early", True)):
                if arm == "early" and t >= 16:
                    continue
                ep = episode(arm, f"t{t:03d}", trial, [("get_user", "ok")], success=ok)
                if sequential:
                    ep = ep.model_copy(update={"metadata": {"stopping": "sequential"}})
                out.append(ep)
    return out


def test_a_sequential_run_pairs_each_comparison_on_its_own_tasks() -> None:
    """The fixed-design part of a sequential run's report: each arm against the reference on
    the tasks both ran, not on the tasks every arm ran (the earliest stop would set them)."""
    options = AnalysisSettings(reference="ref", bootstrap=200)
    seq = analyze(_stopped_run(True), options)
    by_arm = {c.arm: c for c in seq.cells[0].comparisons}
    assert by_arm["late"].paired_tasks == 48 and by_arm["early"].paired_tasks == 16
    assert by_arm["late"].gap_default.gap == pytest.approx(0.5)
    assert seq.cells[0].notices == [Notice(kind="paired_per_arm")]  # words: the report's
    fixed = analyze(_stopped_run(False), options)  # not sequential: the common tasks, as before
    assert {c.paired_tasks for c in fixed.cells[0].comparisons} == {16}
    assert [n.kind for n in fixed.cells[0].notices] == ["tasks_left_out"]


def test_only_a_sequential_run_marks_its_verdicts_as_the_runs_own() -> None:
    """`ran_sequentially` (the report leads with such a verdict) is set for the episodes of a
    sequential run and absent from the replay of a fixed-design run."""
    options = AnalysisSettings(reference="ref", bootstrap=100, sequential=True)
    ran = analyze(_stopped_run(True), options)
    replay = analyze(_stopped_run(False), options)
    assert all(c.sequential and c.sequential.ran_sequentially for c in ran.cells[0].comparisons)
    assert all(
        c.sequential and not c.sequential.ran_sequentially for c in replay.cells[0].comparisons
    )
    assert '"ran_sequentially"' not in replay.model_dump_json()


def test_an_early_stop_has_the_gap_at_the_stop_and_says_what_the_fixed_numbers_rest_on() -> None:
    """Decided before the maximum: `after_stop` holds the gap on the tasks read to the stop
    with its repeated interval, wider than the fixed design's on those tasks. Where the
    run's files hold every task the fixed numbers rest on all of them; where the run stopped
    there (its files end at the stop) they are conditional on stopping — and the interval,
    which only reads the tasks to the stop, is the same."""
    options = AnalysisSettings(reference="ref", bootstrap=100, sequential=True)
    full = analyze(recorded_run({"q": (0.3, None)}), options).cells[0].comparisons[0]
    s = full.sequential
    assert s is not None and s.decided and s.verdict == "visible damage" and s.tasks < TASKS
    a = s.after_stop
    assert a is not None and a.fixed_design == "all tasks" and a.tasks == s.tasks
    assert a.confidence == 0.95 and 0.95 < a.nominal_confidence < 1
    stopped = analyze(recorded_run({"q": (0.3, s.tasks)}), options).cells[0].comparisons[0]
    assert stopped.paired_tasks == s.tasks and stopped.sequential is not None
    b = stopped.sequential.after_stop
    assert b is not None and b.fixed_design == "conditional on stopping"
    assert b.model_copy(update={"fixed_design": "all tasks"}) == a
    g = stopped.gap_default  # the fixed design on the stopped run: the same tasks
    assert b.gap == pytest.approx(g.gap) and g.ci_low is not None and g.ci_high is not None
    assert b.ci_low < g.ci_low <= g.gap <= g.ci_high < b.ci_high


def test_only_a_comparison_decided_before_its_maximum_has_an_after_stop() -> None:
    eps, _ = _episodes(sequential=False)
    result = analyze(eps, AnalysisSettings(bootstrap=100, sequential=True, seed=3))
    seen = set()
    for cell in result.cells:
        s = cell.comparisons[0].sequential
        assert s is not None
        early = s.decided and s.tasks < s.tasks_available
        assert (s.after_stop is not None) == early, cell.model
        seen.add(early)
        if s.after_stop is not None:
            assert s.after_stop.fixed_design == "all tasks"  # a replay: every task the run has
    assert seen == {True, False}
    assert '"after_stop"' not in analyze(eps, AnalysisSettings(bootstrap=100)).model_dump_json()


def test_at_the_maximum_it_clears_only_what_the_fixed_design_clears(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`at_maximum`: "no damage detected" at the design's maximum stands only beside the
    fixed design's own "no damage detected" on the same tasks; otherwise "inconclusive",
    undecided. Through the analysis: two identical arms of 40 tasks are cleared at their
    maximum, and read as inconclusive when the fixed design (forced here) is not."""
    from flatscore.analysis import analyze as analyze_module
    from flatscore.analysis.sequential_replay import at_maximum, replay

    assert at_maximum("no damage detected", True, "no damage detected") == "no damage detected"
    assert at_maximum("no damage detected", True, "inconclusive") == "inconclusive"
    assert at_maximum("no damage detected", True, "flat score, amplified failures") == (
        "inconclusive"
    )
    assert at_maximum("no damage detected", False, "inconclusive") == "no damage detected"
    assert at_maximum("visible damage", True, "no damage detected") == "visible damage"
    calls = [("get_user", "ok"), ("get_order", "fail", "Error: order not found")]
    eps = [
        episode(arm, f"t{t:02d}", k, calls, success=(t + k) % 3 != 0)
        for arm in ("ref", "q")
        for t in range(40)
        for k in range(2)
    ]
    options = AnalysisSettings(bootstrap=100, seed=0, sequential=True, reference="ref")
    (c,) = analyze(eps, options).cells[0].comparisons
    assert c.verdict == "no damage detected" and c.sequential is not None
    assert (c.sequential.verdict, c.sequential.decided, c.sequential.tasks) == (
        "no damage detected",
        True,
        40,
    )

    def fixed_inconclusive(result, *rest):  # type: ignore[no-untyped-def]
        for cell in result.cells:
            for comp in cell.comparisons:
                comp.verdict = "inconclusive"
        return replay(result, *rest)

    monkeypatch.setattr(analyze_module, "replay", fixed_inconclusive)
    (c,) = analyze(eps, options).cells[0].comparisons
    assert c.sequential is not None
    assert (c.sequential.verdict, c.sequential.decided) == ("inconclusive", False)
