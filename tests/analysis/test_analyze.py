"""Known-answer tests: a hand-built study where every number is worked out by hand below."""

from __future__ import annotations

import math

import pytest
from scipy.stats import norm

from analysis_builders import episode
from flatscore.analysis.analyze import AnalysisOptions, analyze
from flatscore.analysis.notices import Notice
from flatscore.analysis.result import AnalysisResult
from flatscore.errors import InputError
from flatscore.report.analysis_text import worded

NOT_FOUND = "Error: User not found"
NOT_PENDING = "Error: Non-pending order cannot be cancelled"


def study() -> list:
    """bf16 (reference) and int4, 3 tasks x 2 trials each; the hand counts are in the tests."""
    ref = [
        episode("bf16", "t1", 0, [("get_user", "ok"), ("foo", "fail"), ("get_order", "ok")]),
        episode("bf16", "t1", 1, [("get_user", "ok")]),
        episode("bf16", "t2", 0, [("get_user", "fail", NOT_FOUND), ("get_user", "ok")]),
        episode(
            "bf16", "t2", 1, [("foo", "fail"), ("bar", "fail"), ("get_order", "ok")], success=False
        ),
        episode(
            "bf16",
            "t3",
            0,
            [("cancel_order", "fail", NOT_PENDING)],
            user_calls=[("toggle_airplane_mode", True)],
        ),
        episode("bf16", "t3", 1, [("get_order", "ok")]),
    ]
    arm = [
        episode(
            "int4", "t1", 0, [("toggle_airplane_mode", "fail"), ("foo", "fail"), ("get_user", "ok")]
        ),
        episode(
            "int4", "t1", 1, [("foo", "fail"), ("foo", "fail"), ("get_order", "ok")], success=False
        ),
        episode("int4", "t2", 0, [("get_user", "ok")]),
        episode("int4", "t2", 1, [("bar", "fail"), ("get_user", "ok")]),
        episode("int4", "t3", 0, [("baz", "fail"), ("get_order", "ok")], malformed=1),
        episode("int4", "t3", 1, [("foo", "fail"), ("get_order", "ok")]),
    ]
    return ref + arm


@pytest.fixture(scope="module")
def result() -> AnalysisResult:
    return analyze(study(), AnalysisOptions(bootstrap=500, seed=1))


def test_cell_structure(result: AnalysisResult) -> None:
    assert len(result.cells) == 1
    cell = result.cells[0]
    assert (cell.model, cell.domain, cell.reference) == ("m", "retail", "bf16")
    assert [a.arm for a in cell.arms] == ["bf16", "int4"]
    assert [(c.arm, c.reference) for c in cell.comparisons] == [("int4", "bf16")]
    assert result.settings.default_K == 9  # recorded max_errors = 10
    assert result.settings.budgets == list(range(10))


def test_reference_arm_numbers(result: AnalysisResult) -> None:
    ref = result.cells[0].arms[0]
    assert (ref.episodes, ref.tasks, ref.trials_min, ref.trials_max) == (6, 3, 2, 2)
    assert ref.success_rate == pytest.approx(5 / 6)
    # pass^1: tasks 2/2, 1/2, 2/2; pass^2: C(2,2)/1, C(1,2)=0, 1.
    assert ref.pass_k == pytest.approx([(1 + 0.5 + 1) / 3, 2 / 3])
    assert ref.agent_tool_calls == 11
    assert ref.failed_agent_calls == 5
    expected = dict(unknown_tool=3, role_confusion=0, near_miss=0, invented=3, not_a_name=0,
                    bad_arguments=0,
                    entity_not_found=1, precondition=1, other=0, malformed_output=0)  # fmt: skip
    assert {k: v.count for k, v in ref.channels.items()} == expected
    for k, n in expected.items():
        assert ref.channels[k].rate == pytest.approx(n / 11)
    assert (ref.user_tool_calls, ref.user_failed_calls) == (1, 1)
    # Failures counted "all" per episode: 1, 0, 1, 2, 1 + 1 user, 0.
    s = [p.success_rate for p in ref.budget_curve]
    assert s[0] == pytest.approx(2 / 6)
    assert s[1] == pytest.approx(4 / 6)
    assert s[2:] == pytest.approx([5 / 6] * 8)
    assert ref.max_failed_calls == 2
    # Recovery: foo→ok yes; get_user→ok yes; foo→bar no; bar→ok yes; cancel (no next) no.
    assert ref.recovery_rate == pytest.approx(3 / 5)
    assert (ref.recovered_calls, ref.failed_calls_with_next_call) == (3, 4)
    assert ref.episode_recovery_rate == pytest.approx(3 / 4)
    assert ref.hallucinated_names == {"bar": 1, "foo": 2}
    assert ref.termination_reasons == {"user_stop": 6}
    # messages = 2 + 2·calls + 2·user calls + malformed; turns = calls + malformed + 1.
    assert ref.trajectory.messages.mean == pytest.approx(36 / 6)
    assert ref.trajectory.agent_turns.mean == pytest.approx(17 / 6)
    assert ref.trajectory.agent_tool_calls.mean == pytest.approx(11 / 6)


def test_quantized_arm_numbers(result: AnalysisResult) -> None:
    arm = result.cells[0].arms[1]
    assert arm.success_rate == pytest.approx(5 / 6)
    assert arm.pass_k == pytest.approx([5 / 6, 2 / 3])
    assert arm.agent_tool_calls == 13
    assert arm.channels["role_confusion"].count == 1  # toggle_airplane_mode is a user tool
    assert arm.channels["invented"].count == 6
    assert arm.channels["unknown_tool"].rate == pytest.approx(7 / 13)
    assert arm.channels["malformed_output"].count == 1
    assert arm.malformed_outputs == 1
    s = [p.success_rate for p in arm.budget_curve]  # failures 2, 2, 0, 1, 1, 1
    assert s[:3] == pytest.approx([1 / 6, 4 / 6, 5 / 6])
    assert arm.recovery_rate == pytest.approx(5 / 7)
    assert arm.episode_recovery_rate == pytest.approx(4 / 5)
    assert arm.hallucinated_names == {"bar": 1, "baz": 1, "foo": 4, "toggle_airplane_mode": 1}


def test_comparison_numbers(result: AnalysisResult) -> None:
    c = result.cells[0].comparisons[0]
    assert c.paired_tasks == 3
    gaps = {g.K: g.gap for g in c.gap}
    assert gaps[0] == pytest.approx(2 / 6 - 1 / 6)
    assert gaps[1] == pytest.approx(0.0)
    assert all(gaps[k] == pytest.approx(0.0) for k in range(1, 10))
    assert c.gap_default.K == 9
    assert c.gap_amplification.value is None
    assert c.gap_amplification.note_code == "no_positive_gap"  # Gap(9) = 0
    assert c.gap_growth.value == pytest.approx(1 / 6)
    amp = c.channel_amplification
    assert amp["invented"].ratio == pytest.approx((6 / 13) / (3 / 11))
    assert amp["unknown_tool"].ratio == pytest.approx((7 / 13) / (3 / 11))
    assert amp["unknown_tool"].count_ratio == pytest.approx(7 / 3)
    assert amp["entity_not_found"].ratio == pytest.approx(0.0)
    assert amp["role_confusion"].ratio is None and amp["role_confusion"].count_arm == 1
    assert amp["malformed_output"].ratio is None
    # 3 paired tasks are too few for a bootstrap: no interval, a note, nothing amplified.
    u = amp["unknown_tool"]
    assert u.ci_low is None and u.ci_high is None and u.note_codes == ("few_tasks",)
    assert not u.amplified
    # Union bar, baz, foo, toggle: ref [1,0,2,0] → ranks [3,1.5,4,1.5]; arm [1,1,4,1] →
    # [2,2,4,2]; Pearson of the ranks = 3 / sqrt(4.5 · 3) = sqrt(2/3).
    assert c.spearman_rho == pytest.approx(math.sqrt(2 / 3))
    assert c.hallucinated_names_union == 4
    assert c.novel_fraction == pytest.approx(2 / 7)
    assert c.novel_names == ["baz", "toggle_airplane_mode"]
    # Per-task differences at K = 9 are [0.5, -0.5, 0]: b = c = 0.5, the score statistic is
    # 0 and p = 1; the Gap interval is the score interval, never [0, 0].
    assert c.test.startswith("paired score test")
    assert c.p_value == pytest.approx(1.0)
    assert c.gap_default.ci_low is not None and c.gap_default.ci_low < 0 < c.gap_default.ci_high
    assert c.p_holm == pytest.approx(c.p_value)  # one comparison: Holm changes nothing
    assert c.trajectory_difference["messages"].value == pytest.approx(39 / 6 - 36 / 6)
    assert c.trajectory_difference["agent_tool_calls"].value == pytest.approx(2 / 6)
    assert c.recovery_difference.value == pytest.approx(5 / 7 - 3 / 5)


def test_count_agent_only() -> None:
    r = analyze(study(), AnalysisOptions(bootstrap=200, count="agent", budgets=[0, 1]))
    ref = r.cells[0].arms[0]  # agent-only failures 1, 0, 1, 2, 1, 0
    assert [p.success_rate for p in ref.budget_curve] == pytest.approx([2 / 6, 5 / 6, 5 / 6])
    assert r.settings.budgets == [0, 1, 9]  # the default K is always included


def test_verdict_flat_score_when_failures_amplified() -> None:
    """No success difference, but hallucinations tripled on every task: flat score."""
    eps = []
    for t in range(60):
        ok = t % 4 != 0
        eps.append(episode("bf16", f"t{t}", 0, [("foo", "fail"), ("get_user", "ok")], success=ok))
        eps.append(
            episode("int4", f"t{t}", 0, [("foo", "fail")] * 3 + [("get_user", "ok")], success=ok)
        )
    r = analyze(eps, AnalysisOptions(bootstrap=500, budgets=[0, 1, 2]))
    c = r.cells[0].comparisons[0]
    assert c.test.startswith("paired score test") and c.p_value == 1.0
    assert c.tost_equivalent
    assert c.amplified_channels == ["unknown_tool", "invented"]
    assert c.gap[1].gap == pytest.approx(45 / 60)  # S_ref(1) = 45/60, S_arm(1) = 0
    assert r.cells[0].verdict == "flat score, amplified failures"


def test_verdict_visible_damage_and_no_damage() -> None:
    eps = []
    for t in range(60):
        eps.append(episode("bf16", f"t{t}", 0, [("get_user", "ok")], success=True))
        eps.append(episode("int4", f"t{t}", 0, [("get_user", "ok")], success=t % 2 == 0))
        eps.append(episode("int8", f"t{t}", 0, [("get_user", "ok")], success=True))
    r = analyze(eps, AnalysisOptions(bootstrap=300))
    by_arm = {c.arm: c for c in r.cells[0].comparisons}
    assert by_arm["int4"].verdict == "visible damage" and by_arm["int4"].significant
    assert by_arm["int8"].verdict == "no damage detected"
    assert r.cells[0].verdict == "visible damage"
    assert r.cells[0].risk_screen.verdict == "low risk"


def test_infrastructure_errors_excluded() -> None:
    eps = [*study(), episode("int4", "t1", 2, termination="infrastructure_error")]
    r = analyze(eps, AnalysisOptions(bootstrap=200))
    arm = r.cells[0].arms[1]
    assert arm.infrastructure_errors == 1 and arm.episodes == 6
    assert r.infrastructure_errors == 1 and r.episodes_read == 13
    assert arm.pass_k == pytest.approx([5 / 6, 2 / 3])


def test_reference_named_and_missing() -> None:
    r = analyze(study(), AnalysisOptions(bootstrap=200, reference="int4"))
    assert r.cells[0].reference == "int4"
    assert r.cells[0].comparisons[0].arm == "bf16"
    with pytest.raises(InputError, match="reference arm 'fp32'"):
        analyze(study(), AnalysisOptions(bootstrap=200, reference="fp32"))


def test_budget_warning_when_not_recomputable() -> None:
    r = analyze(study(), AnalysisOptions(bootstrap=200, budgets=[0, 12]))
    assert r.warnings == [] and r.notices == [Notice(kind="not_recomputable", budget=10)]
    assert r.cells[0].arms[0].budget_curve[-1].recomputable is False


def test_json_is_deterministic() -> None:
    a = analyze(study(), AnalysisOptions(bootstrap=300, seed=3)).model_dump_json(indent=2)
    b = analyze(list(reversed(study())), AnalysisOptions(bootstrap=300, seed=3)).model_dump_json(
        indent=2
    )
    assert a == b
    c = analyze(study(), AnalysisOptions(bootstrap=300, seed=4)).model_dump_json(indent=2)
    assert c != a  # the seed matters (CIs move)


def test_empty_input_is_an_input_error() -> None:
    with pytest.raises(InputError, match="no episodes"):
        analyze([], AnalysisOptions())


def test_malformed_output_rate_is_per_attempted_call() -> None:
    """One tool call and two unparseable outputs: 2 malformed of 3 attempts, not 2 of 1."""
    eps = [episode("bf16", "t0", 0, [("get_user", "ok")], malformed=2)]
    arm = analyze(eps, AnalysisOptions(bootstrap=100)).cells[0].arms[0]
    assert arm.channels["malformed_output"].count == 2
    assert arm.channels["malformed_output"].rate == pytest.approx(2 / 3)
    assert arm.channels["bad_arguments"].rate == 0.0


def test_a_big_but_untestable_drop_is_inconclusive_not_no_damage() -> None:
    """4 tasks, reference 4/4, arm 1/4: b = 3, c = 0 (fewer than 6 discordant tasks: the score
    statistic), score test p = 2·Φ(−3/√3) = 0.083, not significant; a 75-point drop is far
    outside the ±7.5 margin → inconclusive."""
    eps = []
    for t in range(4):
        eps.append(episode("bf16", f"t{t}", 0, [("get_user", "ok")], success=True))
        eps.append(episode("int4", f"t{t}", 0, [("get_user", "ok")], success=t == 0))
        eps.append(episode("int8", f"t{t}", 0, [("get_user", "ok")], success=True))
    r = worded(analyze(eps, AnalysisOptions(bootstrap=200)))
    by_arm = {c.arm: c for c in r.cells[0].comparisons}
    assert by_arm["int4"].p_value == pytest.approx(2 * norm.sf(3 / math.sqrt(3)))
    assert not by_arm["int4"].significant
    assert by_arm["int4"].verdict == "inconclusive"
    assert "too few tasks" in by_arm["int4"].verdict_reason
    # The CI and the test agree: p > 0.05, so the interval includes 0.
    assert by_arm["int4"].gap_default.ci_low < 0 < by_arm["int4"].gap_default.ci_high
    # int8: 4/4 vs 4/4 — no difference, but 4 tasks cannot show equivalence within ±7.5:
    # not TOST-equivalent, the interval reaches ±49 points (z²/(4 + z²)) → inconclusive.
    i8 = by_arm["int8"]
    assert not i8.tost_equivalent and i8.gap_default.ci_high == pytest.approx(0.49, abs=0.01)
    assert i8.verdict == "inconclusive"
    assert "[0.0, 0.0]" not in i8.verdict_reason
    assert r.cells[0].verdict == "inconclusive"


def test_a_6_of_6_drop_on_6_tasks_is_visible_damage() -> None:
    """Reference 6/6, arm 0/6: six equal differences (no spread for a t), so the score
    statistic: p = 2·Φ(−6/√6) = 0.014 (exact McNemar: 0.031); the CI excludes 0, and the
    verdict agrees with it."""
    eps = []
    for t in range(6):
        eps.append(episode("bf16", f"t{t}", 0, [("get_user", "ok")], success=True))
        eps.append(episode("int4", f"t{t}", 0, [("get_user", "ok")], success=False))
    c = worded(analyze(eps, AnalysisOptions(bootstrap=200))).cells[0].comparisons[0]
    assert c.p_value == pytest.approx(2 * norm.sf(6 / math.sqrt(6)))
    assert c.gap_default.ci_low > 0 and c.verdict == "visible damage"
    assert "+100.0 points" in c.verdict_reason and "+100.0%" not in c.verdict_reason


def test_unequal_trials_weight_tasks_not_episodes() -> None:
    """Task A: 1 trial per arm, ref solves it, arm does not (difference 1). Task B: 4 trials,
    ref 4/4, arm 4/4 (difference 0). Task-weighted gap = (1 + 0) / 2 = 50 points; pooled
    over episodes it would be 1/5 = 20 points. Success rates, S(K), the gap and the test all
    use the task weighting."""
    eps = [episode("bf16", "A", 0, success=True), episode("int4", "A", 0, success=False)]
    for trial in range(4):
        eps += [episode("bf16", "B", trial), episode("int4", "B", trial)]
    r = analyze(eps, AnalysisOptions(bootstrap=200))
    ref, arm = r.cells[0].arms
    assert ref.success_rate == pytest.approx(1.0) and arm.success_rate == pytest.approx(0.5)
    assert arm.budget_curve[-1].success_rate == pytest.approx(0.5)
    c = r.cells[0].comparisons[0]
    assert c.gap_default.gap == pytest.approx(0.5)
    assert c.success_difference.value == pytest.approx(0.5)
    assert "task-weighted" in r.settings.weighting


def test_duplicate_episodes_are_an_error_or_deduped() -> None:
    eps = study()
    with pytest.raises(InputError, match="duplicate episode"):
        analyze(eps + eps[:1], AnalysisOptions(bootstrap=100))
    r = analyze(eps + eps[:1], AnalysisOptions(bootstrap=100, dedupe=True))
    assert r.episodes_read == len(eps)
    assert r.warnings == [] and r.notices[0] == Notice(
        kind="duplicates_left_out", count=1, places=("the input", "the input")
    )
    assert (
        r.cells[0].arms[0].pass_k
        == analyze(eps, AnalysisOptions(bootstrap=100)).cells[0].arms[0].pass_k
    )


def test_undecidable_reference_is_an_input_error() -> None:
    eps = [episode("claude-3-7-sonnet", "t0"), episode("gpt-4.1", "t0")]
    with pytest.raises(InputError, match="--reference"):
        analyze(eps, AnalysisOptions(bootstrap=100))
    eps = [episode("Qwen2.5-7B-Instruct", "t0"), episode("Qwen2.5-7B-Instruct-AWQ", "t0")]
    assert analyze(eps, AnalysisOptions(bootstrap=100)).cells[0].reference == "Qwen2.5-7B-Instruct"


def test_one_arm_is_nothing_to_compare_not_no_damage() -> None:
    r = analyze([episode("bf16", "t0")], AnalysisOptions(bootstrap=100))
    assert r.cells[0].verdict == "nothing to compare"


def test_spearman_interval_holds_its_point_estimate_with_rare_names() -> None:
    """40 tasks: 8 names both arms hallucinate often (in opposite orders of frequency) and 20
    rare names, each in one task of one arm. Many resamples miss a rare name; before the
    bootstrap ranked only each resample's union, that name became a tied (0, 0) pair and the
    interval, [0.40, 0.64], missed its own point estimate (0.348)."""
    eps = []
    for i in range(40):
        ref = [(f"n{j}", "fail") for j in range(8) if (i * 7 + j * 3) % 10 < j + 1]
        arm = [(f"n{j}", "fail") for j in range(8) if (i * 3 + j * 7) % 10 < 8 - j]
        if i % 4 == 0:
            ref.append((f"rare_ref_{i}", "fail"))
        if i % 4 == 1:
            arm.append((f"rare_arm_{i}", "fail"))
        eps.append(episode("bf16", f"t{i}", 0, [*ref, ("get_user", "ok")]))
        eps.append(episode("int4", f"t{i}", 0, [*arm, ("get_user", "ok")]))
    c = analyze(eps, AnalysisOptions(reference="bf16", bootstrap=2000)).cells[0].comparisons[0]
    assert c.hallucinated_names_union == 28
    assert c.spearman_rho == pytest.approx(0.348, abs=1e-3)
    assert c.spearman_ci_low is not None and c.spearman_ci_high is not None
    assert c.spearman_ci_low <= c.spearman_rho <= c.spearman_ci_high


def moved_study() -> list:
    """60 tasks; the arm trades entity_not_found for bad_arguments (2 → 1 and 1 → 2 per
    episode on most tasks) with the same number of failed calls: failures moved, no more
    failure in total."""
    eps = []
    for t in range(60):
        k = 1 + t % 3  # task heterogeneity
        ok = [("get_user", "ok")] * k
        ref = [("get_user", "bad_arguments")] * 1 + [("get_order", "entity_not_found")] * 2
        arm = [("get_user", "bad_arguments")] * 2 + [("get_order", "entity_not_found")] * 1
        if t % 5 == 0:
            arm = ref  # some tasks unchanged: the ratio has a spread, the test a finite SE
        eps.append(episode("bf16", f"t{t}", 0, ref + ok))
        eps.append(episode("int8", f"t{t}", 0, arm + ok))
    return eps


def test_failures_moved_between_channels_in_words() -> None:
    r = worded(analyze(moved_study(), AnalysisOptions(bootstrap=200)))
    c = r.cells[0].comparisons[0]
    assert c.failed_calls is not None and c.failed_calls.ratio == pytest.approx(1.0)
    assert not c.failed_calls.amplified
    assert c.amplified_channels == ["bad_arguments"]
    assert c.channel_amplification["entity_not_found"].p_adjusted < 0.05
    assert c.verdict == "flat score, amplified failures"
    assert "failures moved between channels: up bad_arguments ×1.80" in c.verdict_reason
    assert "down entity_not_found ×0.60" in c.verdict_reason
    assert "all failed calls ×1.00" in c.verdict_reason and "not more in total" in c.verdict_reason
    # The family is stated: every tested channel ratio of the study, corrected by Holm.
    fam = r.channel_family
    assert fam is not None and fam.correction == "holm" and fam.failed_calls_size == 1
    assert fam.members == [
        "m / retail / int8: bad_arguments",
        "m / retail / int8: entity_not_found",
    ]
    assert fam.size == 2


@pytest.mark.parametrize(("correction", "method"), [("holm", "holm"), ("bh", "fdr_bh")])
def test_channel_correction_over_the_study(correction: str, method: str) -> None:
    """Known answer: the corrected p of each channel is Holm's (or BH's, as the study's
    correction says; statsmodels) over the family, and `amplified` follows the corrected p,
    not the raw one."""
    from statsmodels.stats.multitest import multipletests

    from flatscore.analysis.comparison import correct_channels

    c = analyze(moved_study(), AnalysisOptions(bootstrap=200)).cells[0].comparisons[0]
    raw = {"bad_arguments": 0.02, "entity_not_found": 0.04, "unknown_tool": 0.03}
    amp = {
        ch: a.model_copy(update={"p_value": raw.get(ch), "ratio": 1.5 if ch in raw else a.ratio})
        for ch, a in c.channel_amplification.items()
    }
    c2 = c.model_copy(update={"channel_amplification": amp, "arm": "int4"})
    done, fam = correct_channels([("m / retail", c), ("m / retail", c2)], correction, 0.05)  # type: ignore[arg-type]
    ps = [a.p_value for d in done for a in d.channel_amplification.values() if a.p_value]
    expected = multipletests(ps, method=method)[1]
    got = [a.p_adjusted for d in done for a in d.channel_amplification.values() if a.p_value]
    assert got == pytest.approx(list(expected))
    assert fam is not None and fam.size == 5
    # raw 0.02 < 0.05, but Holm over 5 gives 0.02 × 3 = 0.06: not amplified; BH gives
    # 0.02 × 5 / 3 = 0.033 (and 0.04, 0.04 for the others): all three amplified.
    bad = done[1].channel_amplification["bad_arguments"]
    assert bad.p_adjusted == pytest.approx(0.06 if correction == "holm" else 0.1 / 3)
    assert done[1].amplified_channels == (
        [] if correction == "holm" else ["unknown_tool", "bad_arguments", "entity_not_found"]
    )
    assert fam.correction == correction
