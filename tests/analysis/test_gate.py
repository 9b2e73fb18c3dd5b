"""`flatscore gate`'s decision (flatscore.analysis.gate) on synthetic runs built for each
exit path: pass, damage (a channel, a success drop), inconclusive, and bad input."""

from __future__ import annotations

import pytest

from analysis_builders import episode
from flatscore.analysis.analyze import analyze
from flatscore.analysis.gate import EXIT_CODES, Family, GateOptions, GateResult
from flatscore.episode import Episode
from flatscore.errors import InputError
from flatscore.formats.pipeline import gate_labelled
from flatscore.report.gate_text import worded_gate


def gate(
    reference: list[Episode],
    candidate: list[Episode],
    options: GateOptions | None = None,
    reference_arm: str | None = None,
    candidate_arm: str | None = None,
) -> GateResult:
    """The gate's result as the command gives it (its episodes read from no file): prepared,
    analysed and decided (`gate_labelled`), then worded (its reasons)."""
    ref = [(None, e) for e in reference]
    cand = [(None, e) for e in candidate]
    return worded_gate(gate_labelled(ref, cand, options, reference_arm, candidate_arm))


FAST = GateOptions(bootstrap=300, simulations=100)


def run(
    arm: str,
    tasks: int,
    *,
    extra_unknown: bool = False,
    failing: int = 0,
    trials: int = 1,
    lookups: int = 1,
    fail_every: int = 4,
    extra_every: int = 1,
) -> list[Episode]:
    """`tasks` tasks of `lookups` + 1 successful calls: every `fail_every`-th task has one
    failed unknown-tool call (0: none), every 5th fails; with `extra_unknown` every
    `extra_every`-th task adds a failed call to an invented tool; the first `failing` tasks
    fail outright."""
    out = []
    for t in range(tasks):
        calls: list = [("get_user", "ok")] * lookups
        if fail_every and t % fail_every == 0:
            calls.append(("foo", "fail"))
        if extra_unknown and t % extra_every == 0:
            calls.append(("bar", "fail"))
        calls.append(("get_order", "ok"))
        ok = t % 5 != 0 and t >= failing
        out += [episode(arm, f"t{t:03d}", k, calls, success=ok) for k in range(trials)]
    return out


def test_equal_runs_pass() -> None:
    result = gate(run("bf16", 80), run("int8", 80), FAST)
    assert result.verdict == "pass" and result.exit_code == EXIT_CODES["pass"] == 0
    (cell,) = result.cells
    assert [b.K for b in cell.budgets] == [9, 2]
    assert all(b.equivalent for b in cell.budgets) and cell.channels_tested
    assert result.summary.startswith("PASS")


def test_an_amplified_channel_is_damage_even_with_an_equal_score() -> None:
    result = gate(run("bf16", 80), run("int4", 80, extra_unknown=True), FAST)
    assert result.verdict == "damage" and result.exit_code == 3
    (cell,) = result.cells
    assert "unknown_tool" in cell.amplified_channels
    assert all(b.equivalent for b in cell.budgets)  # the score alone would have passed
    assert "amplified channel(s): unknown_tool" in cell.reason


def test_a_channel_new_in_the_candidate_is_tested_over_tasks() -> None:
    """The reference never fails a call, the candidate does in every task: no ratio exists,
    but the exact sign test over tasks (80 arm-only tasks against 0) flags it: damage."""
    result = gate(run("bf16", 80, fail_every=0), run("int4", 80, extra_unknown=True), FAST)
    (cell,) = result.cells
    assert "unknown_tool" in cell.amplified_channels and cell.new_channels == {}
    assert result.verdict == "damage" and "amplified channel(s): unknown_tool" in cell.reason


def test_an_untested_new_channel_keeps_it_from_passing() -> None:
    """Below the task minimum nothing is tested: a channel new in the candidate is named and
    the gate does not pass it."""
    result = gate(run("bf16", 20, fail_every=0), run("int4", 20, extra_unknown=True), FAST)
    (cell,) = result.cells
    assert cell.amplified_channels == [] and cell.new_channels["unknown_tool"] == 25
    assert result.verdict == "inconclusive" and "new in the arm" in cell.reason


def test_the_overall_verdict_is_the_worst_cells() -> None:
    """A passing domain must not hide a damaged one: retail loses 30 of 80 tasks, telecom
    is equal; the gate says damage (exit 3), whichever cell comes first."""
    ref = run("bf16", 80) + [e.model_copy(update={"domain": "telecom"}) for e in run("bf16", 80)]
    telecom = [e.model_copy(update={"domain": "telecom"}) for e in run("int8", 80)]
    for cand in (run("int8", 80, failing=30) + telecom, telecom + run("int8", 80, failing=30)):
        result = gate(ref, cand, FAST)
        verdicts = {c.domain: c.verdict for c in result.cells}
        assert verdicts == {"retail": "damage", "telecom": "pass"}
        assert result.verdict == "damage" and result.exit_code == 3
        assert result.summary.startswith("DAMAGE")


def test_channels_option_says_which_channels_block() -> None:
    """Extra unknown-tool failures on tasks that fail anyway (no success lost at any K):
    damage by the channel test, a pass when only bad_arguments may block."""
    damaged = run("int4", 80, extra_unknown=True, extra_every=5)
    assert gate(run("bf16", 80), damaged, FAST).verdict == "damage"
    options = FAST.model_copy(update={"channels": ["bad_arguments"]})
    result = gate(run("bf16", 80), damaged, options)
    assert result.verdict == "pass" and result.cells[0].amplified_channels == []
    # the analysis' own verdict counts every channel: --channels restricts only the gate
    assert result.cells[0].analysis_verdict == "flat score, amplified failures"


def test_a_significant_success_drop_is_damage() -> None:
    result = gate(run("bf16", 80), run("int4", 80, failing=30), FAST)
    assert result.verdict == "damage"
    (cell,) = result.cells
    assert all(b.significant and (b.gap or 0) > 0.2 for b in cell.budgets)
    assert "significant success drop at the default K = 9" in cell.reason


def test_a_significant_drop_inside_the_margin_passes_and_is_reported() -> None:
    """8 of 200 tasks lost (4 points, 95% CI about +1 to +7): significant, yet TOST bounds it
    inside ±7.5 — the tolerance the gate was given, so a pass that names the drop."""
    result = gate(run("bf16", 200), run("int8", 200, failing=10), FAST)
    (cell,) = result.cells
    assert all(b.significant and b.equivalent for b in cell.budgets), cell.budgets
    assert result.verdict == "pass" and result.exit_code == 0
    assert "a significant 4.0-point drop, inside the ±7.5-point margin" in cell.reason
    assert "at the tight K = 2 +4.0 points, a drop beyond ±7.5 points ruled out (the 90% " in (
        cell.reason
    )


def test_a_small_study_is_inconclusive_and_says_how_many_tasks_would_decide() -> None:
    """The power simulation needs episodes that can exceed the tight budget: 8 calls, one of
    them failed (a 7.5-point drop at K = 2 then needs a few hundred tasks)."""
    small = {"trials": 2, "lookups": 6, "fail_every": 1}
    result = gate(run("bf16", 12, **small), run("int8", 12, **small), FAST)
    assert result.verdict == "inconclusive" and result.exit_code == 4
    (cell,) = result.cells
    assert not cell.channels_tested and "channels not tested" in cell.reason
    more = cell.more_data
    assert more is not None and more.K == 2
    assert more.tasks is not None and more.tasks > 12, more.note
    assert str(more.tasks) in result.summary


def test_the_same_arm_name_on_both_sides_is_told_apart() -> None:
    """Two runs of an arm of one name (ids alike: the same study, tasks and trials) that are
    not the same episodes: the candidate is renamed, not refused."""
    result = gate(run("bf16", 80), run("bf16", 80, lookups=2), FAST)
    assert result.cells[0].candidate == "bf16 (candidate)" and result.verdict == "pass"


def test_a_studys_runs_are_gated_over_the_studys_comparisons() -> None:
    """One study's runs holding other arms beside the two compared (its folder as both
    inputs, or the reference's file and the folder) are analysed whole, every arm against
    the reference as `report` does: the candidate's corrected p-value is the study
    analysis', not that of the two runs alone (two separate runs: the gate's own family)."""
    ref, int8 = run("bf16", 80), run("int8", 80, failing=30)
    study = ref + int8 + run("int4", 80, failing=20)  # int8's p the smaller: Holm doubles it
    whole = gate(study, study, FAST, reference_arm="bf16", candidate_arm="int8")
    assert whole.family == Family(scope="study", comparisons=2, arms=["int4", "int8"])
    assert "corrected over the study's 2 comparisons (2 arms)" in whole.summary
    assert gate(ref, study, FAST, candidate_arm="int8").family.scope == "study"
    own = gate(ref, int8, FAST)
    assert own.family == Family(scope="own", comparisons=1, arms=["int8"])
    assert "corrected over its own 1 comparison)" in own.summary

    reported = analyze(study, FAST.analysis("bf16"))
    (comp,) = [c for c in reported.cells[0].comparisons if c.arm == "int8"]
    assert whole.cells[0].budgets[0].p_adjusted == comp.budget_tests[0].p_adjusted
    alone = own.cells[0].budgets[0]
    assert comp.budget_tests[0].p_adjusted == pytest.approx(2 * (alone.p_adjusted or 0))


def test_runs_of_other_studies_or_copies_are_not_one_study() -> None:
    """The arms' episodes from two studies, or two copies of one study's episode that
    differ, are not one study's runs: the gate keeps its own family."""
    study = run("bf16", 40) + run("int8", 40) + run("int4", 40)
    other = [e.model_copy(update={"study": "t"}) for e in run("int8", 40) + run("int4", 40)]
    result = gate(study, other, FAST, reference_arm="bf16", candidate_arm="int8")
    assert result.family.scope == "own"
    changed = [e.model_copy(update={"reward": 0.5}) if e.arm == "int4" else e for e in study]
    result = gate(study, changed, FAST, reference_arm="bf16", candidate_arm="int8")
    assert result.family.scope == "own" and result.family.comparisons == 1


def test_the_same_episodes_on_both_sides_are_refused() -> None:
    with pytest.raises(InputError, match="the same episodes"):
        gate(run("bf16", 80), run("bf16", 80), FAST)


@pytest.mark.parametrize(
    ("options", "arms", "message"),
    [
        (FAST, {}, "holds 2 arms"),
        (FAST.model_copy(update={"tight_budget": 9}), {"reference_arm": "bf16"}, "must be below"),
        (FAST.model_copy(update={"channels": ["nope"]}), {}, "unknown channel"),
        (FAST, {"reference_arm": "fp4"}, "no arm 'fp4'"),
        (FAST.model_copy(update={"default_budget": 10}), {"reference_arm": "bf16"}, "recomputable"),
    ],
)
def test_bad_requests_are_one_input_error(
    options: GateOptions, arms: dict[str, str], message: str
) -> None:
    both = run("bf16", 10) + run("int8", 10)
    with pytest.raises(InputError, match=message):
        gate(both, run("int4", 10), options, **arms)
