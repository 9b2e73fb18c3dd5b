"""One arm against its cell's reference, and the verdict (docs/analysis.md, "Definitions" and
"Statistical choices").

Success differences (Gap(K), gap growth) get the paired success-difference interval
(`paired_score`: a score statistic on per-task differences, Tango's with few discordant tasks) at
every study size; the paired test and TOST use the same statistic. Statistics with no
small-sample interval (channel ratios, Spearman ρ, trajectory and recovery differences) get a
task-bootstrap interval only when the cell has at least `bootstrap_min_tasks` paired tasks;
below that their intervals are null with a note, and nothing is called amplified.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from flatscore.analysis.channels import CHANNELS
from flatscore.analysis.facts import TRAJECTORY_METRICS
from flatscore.analysis.invariance import novel_fraction, rowwise_spearman, spearman_rho
from flatscore.analysis.outputs import NoteCode
from flatscore.analysis.paired_score import (
    TEST,
    paired_difference_interval,
    paired_interval,
    paired_test,
    paired_tost,
)
from flatscore.analysis.rate_ratio import METHOD as RATIO_METHOD
from flatscore.analysis.rate_ratio import rate_ratio_test
from flatscore.analysis.result import (
    ChannelAmplification,
    ChannelFamily,
    Comparison,
    GapAmplification,
    GapPoint,
    Interval,
    Verdict,
)
from flatscore.analysis.settings import AnalysisSettings, Correction
from flatscore.analysis.stats import adjust_pvalues, percentile_ci, ratio
from flatscore.analysis.task_matrix import MALFORMED, TaskMatrix
from flatscore.analysis.task_sign import task_sign_test
from flatscore.analysis.verdict_rule import BudgetTest, Evidence
from flatscore.analysis.verdict_rule import decide as decide_verdict

VERDICT_ORDER: tuple[Verdict, ...] = (
    "visible damage",
    "flat score, amplified failures",
    "inconclusive",
    "no damage detected",
    "nothing to compare",
)


_LOOPS: tuple[tuple[str, str, str, NoteCode], ...] = (
    ("repeat", "repeats", "agent_failed", "no_failed_calls"),
    ("reissue", "reissued", "calls", "no_agent_calls"),
)
"""The loop differences: key, numerator, denominator, and why a value may be missing."""


def _boot_interval(
    point: float | None, boot: np.ndarray | None, conf: float, why: NoteCode | None
) -> Interval:
    """The point with its bootstrap interval; `why` (a `NoteCode`) says why a value or an
    interval is missing (the words are the report's)."""
    if point is None or not np.isfinite(point):
        return Interval(value=None, note_code=why or "undefined")
    if boot is None:
        return Interval(value=float(point), note_code=why)
    lo, hi = percentile_ci(boot, conf)
    return Interval(value=float(point), ci_low=lo, ci_high=hi, note_code=why)


def _finite(x: float | None) -> float | None:
    return float(x) if x is not None and np.isfinite(x) else None


MALFORMED_DEN = "attempts"


def channel_ratio(
    ref: TaskMatrix, alt: TaskMatrix, num: str, den: str, conf: float, few: bool
) -> ChannelAmplification:
    """rate_arm / rate_ref of one channel (or of all failed calls) on the paired tasks, with
    the task-clustered score test, its inverted interval and uncorrected p (`rate_ratio`;
    an unbounded upper end is null); where the channel is new in the arm (no ratio) the
    exact sign test over tasks (`task_sign`); none below the cell's minimum task count
    (`few`). Why a number is missing is `note_codes` (the report words them); `amplified`
    is decided study-wide (`correct_channels`)."""
    r_ref, r_arm = ref.rate(num, den), alt.rate(num, den)
    c_ref = round(float((ref.column(num) * ref.episodes).sum()))
    c_arm = round(float((alt.column(num) * alt.episodes).sum()))
    point = r_arm / r_ref if r_ref and r_arm is not None else None
    lo = hi = p = None
    why: tuple[NoteCode, ...] = ()
    test: Literal["rate_ratio", "task_sign"] | None = None
    sparse = False
    if point is None:
        why = (
            ("new_in_arm",)
            if c_ref == 0 and c_arm > 0
            else ("no_failures",)
            if c_ref == 0
            else ("no_calls",)
        )
        sparse = c_ref == 0 and c_arm > 0
    elif few:
        why = ("few_tasks",)
    elif point > 0:
        t = rate_ratio_test(
            alt.column(num), alt.column(den), ref.column(num), ref.column(den), conf
        )
        lo, hi, p = (_finite(float(v)) for v in (t.ci_low, t.ci_high, t.p_value))
        if p is None:
            why = ("no_spread",)
            sparse = True
        else:
            test = "rate_ratio"
            if hi is None:
                why = ("unbounded",)
    else:
        why = ("never_failed",)
    arm_only = ref_only = None
    if sparse and not few:
        s = task_sign_test(alt.column(num), ref.column(num))
        p, test, arm_only, ref_only = s.p_value, "task_sign", s.arm_only, s.ref_only
        why = (*why, "sign_test")
    elif sparse:
        why = (*why, "few_tasks")
    return ChannelAmplification(
        ratio=point,
        ci_low=lo,
        ci_high=hi,
        count_ratio=c_arm / c_ref if c_ref else None,
        count_arm=c_arm,
        count_ref=c_ref,
        rate_arm=_finite(r_arm),
        rate_ref=_finite(r_ref),
        amplified=False,
        note_codes=why,
        p_value=p,
        test=test,
        tasks_arm_only=arm_only,
        tasks_ref_only=ref_only,
    )


def increase(a: ChannelAmplification) -> bool:
    """The direction a test must show for `amplified`: ratio above 1, or (no ratio) more
    tasks where only the arm fails this way than where only the reference does."""
    if a.ratio is not None:
        return a.ratio > 1
    return (a.tasks_arm_only or 0) > (a.tasks_ref_only or 0)


def gap_amplification(small: GapPoint, default: GapPoint) -> GapAmplification:
    """Gap(K_small) / Gap(K_default), only where it means "the gap grows by this factor":
    both gaps positive and Gap(K_default)'s interval above 0. Otherwise null, and the note
    says why (`note_code`; a ratio of a negative or noisy denominator reads as a factor it
    is not)."""
    why: NoteCode | None = None
    assert small.gap is not None and default.gap is not None
    if default.gap <= 0 or small.gap <= 0:
        why = "no_positive_gap"
    elif default.ci_low is None or default.ci_low <= 0:
        why = "gap_is_noise"
    return GapAmplification(
        k_small=small.K,
        k_default=default.K,
        value=None if why else small.gap / default.gap,
        note_code=why,
    )


def decide(
    up: list[bool], p_values: list[float], correction: Correction, alpha: float
) -> tuple[list[float], list[bool]]:
    """One family's adjusted p-values and amplification decisions: amplified = an increase
    (`up`, see `increase`) whose corrected two-sided p is below alpha."""
    adjusted = adjust_pvalues(p_values, correction)
    return adjusted, [u and p < alpha for u, p in zip(up, adjusted, strict=True)]


def correct_channels(
    comparisons: list[tuple[str, Comparison]], correction: Correction, alpha: float
) -> tuple[list[Comparison], ChannelFamily | None]:
    """Every channel ratio of the study corrected as one family (Holm, or BH when the study's
    correction says so), the all-channel ratios as another; `amplified` = ratio > 1 and
    adjusted p < alpha. `comparisons` pairs each comparison with its cell's 'model / domain'."""
    tested = {
        (i, ch): a
        for i, (_, c) in enumerate(comparisons)
        for ch, a in c.channel_amplification.items()
        if a.p_value is not None
    }
    totals = {
        i: c.failed_calls
        for i, (_, c) in enumerate(comparisons)
        if c.failed_calls is not None and c.failed_calls.p_value is not None
    }

    def corrected(group: dict[Any, ChannelAmplification]) -> dict[Any, ChannelAmplification]:
        ups = [increase(a) for a in group.values()]
        adjusted, up = decide(ups, [a.p_value or 0.0 for a in group.values()], correction, alpha)
        return {
            key: a.model_copy(update={"p_adjusted": p, "amplified": u})
            for (key, a), p, u in zip(group.items(), adjusted, up, strict=True)
        }

    members = list(tested)
    by_member, by_total = corrected(tested), corrected(totals)

    out = []
    for i, (_, c) in enumerate(comparisons):
        amp = {ch: by_member.get((i, ch), a) for ch, a in c.channel_amplification.items()}
        total = by_total.get(i, c.failed_calls)
        out.append(
            c.model_copy(
                update={
                    "channel_amplification": amp,
                    "amplified_channels": [ch for ch, a in amp.items() if a.amplified],
                    "failed_calls": total,
                }
            )
        )
    if not members and not totals:
        return out, None
    family = ChannelFamily(
        correction=correction,
        test=RATIO_METHOD,
        alpha=alpha,
        size=len(members),
        members=[f"{comparisons[i][0]} / {comparisons[i][1].arm}: {ch}" for i, ch in members],
        failed_calls_size=len(totals),
    )
    return out, family


def compare(
    arm: str,
    reference: str,
    ref: TaskMatrix,
    alt: TaskMatrix,
    budgets: list[int],
    default_k: int,
    settings: AnalysisSettings,
    weights: np.ndarray | None,
) -> Comparison:
    """Every arm-vs-reference number on the paired tasks (both matrices share one task list).

    `weights` is the (resamples × tasks) bootstrap draw matrix, or None when the cell has too
    few tasks for a bootstrap. The returned comparison has its raw p-value; `finalize` adds the
    study-wide adjusted p-values and the verdict."""
    conf = settings.confidence
    n_tasks = len(ref.tasks)
    few = weights is None

    def diff(k: int) -> np.ndarray:
        return ref.column(f"S{k}") - alt.column(f"S{k}")

    gaps: list[GapPoint] = []
    all_d = np.stack([diff(k) for k in budgets])  # (budgets × tasks): one vectorised interval
    los, his = paired_interval(all_d, conf)
    for j, k in enumerate(budgets):
        d = all_d[j]
        lo: float | None = float(los[j])
        hi: float | None = float(his[j])
        gaps.append(
            GapPoint(
                K=k,
                gap=float(d.mean()),
                ci_low=lo,
                ci_high=hi,
                s_ref=ref.rate(f"S{k}", "task"),
                s_arm=alt.rate(f"S{k}", "task"),
            )
        )
    g_default = next(g for g in gaps if default_k == g.K)
    k_small = min(budgets)
    g_small = next(g for g in gaps if k_small == g.K)
    assert g_default.gap is not None and g_small.gap is not None
    amp = gap_amplification(g_small, g_default)
    growth_d = diff(k_small) - diff(default_k)
    g_lo, g_hi = paired_difference_interval(growth_d, conf)
    growth = Interval(value=float(growth_d.mean()), ci_low=g_lo, ci_high=g_hi)

    R, A = ref.means.sum(axis=0), alt.means.sum(axis=0)
    BR = BA = None
    if weights is not None:
        BR, BA = weights @ ref.means, weights @ alt.means
    cols = ref.columns

    def rate(v: np.ndarray, num: str, den: str) -> np.ndarray:
        return ratio(v[..., cols[num]], v[..., cols[den]])

    channel_amp = {
        ch: channel_ratio(ref, alt, ch, MALFORMED_DEN if ch == MALFORMED else "calls", conf, few)
        for ch in CHANNELS
    }
    failed_calls = channel_ratio(ref, alt, "agent_failed", "calls", conf, few)

    names = list(ref.names)
    ref_counts = (ref.name_means * ref.episodes[:, None]).sum(axis=0)
    arm_counts = (alt.name_means * alt.episodes[:, None]).sum(axis=0)
    ref_names = Counter({n: round(c) for n, c in zip(names, ref_counts, strict=True) if c})
    arm_names = Counter({n: round(c) for n, c in zip(names, arm_counts, strict=True) if c})
    union = sorted(set(ref_names) | set(arm_names))
    rho, rho_why = spearman_rho(ref_names, arm_names)
    rho_lo = rho_hi = None
    if rho is not None and weights is not None:
        # Resample each task's counts (not its means), so every resampled ρ has the point
        # estimate's estimand: per-name counts over the resample's union of names.
        idx = [names.index(n) for n in union]
        ref_task_counts = ref.name_means[:, idx] * ref.episodes[:, None]
        arm_task_counts = alt.name_means[:, idx] * alt.episodes[:, None]
        boot_rho = rowwise_spearman(weights @ ref_task_counts, weights @ arm_task_counts)
        rho_lo, rho_hi = percentile_ci(boot_rho, conf)
    elif rho is not None:
        rho_why = "few_tasks"
    novel, novel_names = novel_fraction(ref_names, arm_names)

    d_default = diff(default_k)
    tests = [budget_test(d_default, g_default, settings)]
    tight = settings.tight_budget
    if tight < default_k and tight in budgets:
        tests.append(budget_test(diff(tight), next(g for g in gaps if tight == g.K), settings))
    p_value, tost_p = tests[0].p_value, tests[0].tost_p
    equivalent = tests[0].equivalent

    def boot_diff(num: str, den: str) -> np.ndarray | None:
        if BR is None or BA is None:
            return None
        return rate(BA, num, den) - rate(BR, num, den)

    traj = {
        m: _boot_interval(
            float(rate(A, f"traj_{m}", "task") - rate(R, f"traj_{m}", "task")),
            boot_diff(f"traj_{m}", "task"),
            conf,
            "few_tasks" if few else None,
        )
        for m in TRAJECTORY_METRICS
    }
    rec_point = float(rate(A, "recovered", "agent_failed") - rate(R, "recovered", "agent_failed"))
    recovery = _boot_interval(
        _finite(rec_point),
        boot_diff("recovered", "agent_failed"),
        conf,
        ("few_tasks" if few else None) if np.isfinite(rec_point) else "no_failed_calls",
    )
    loops = {
        key: _boot_interval(
            _finite(float(rate(A, num, den) - rate(R, num, den))),
            boot_diff(num, den),
            conf,
            ("few_tasks" if few else None)
            if np.isfinite(float(rate(A, num, den) - rate(R, num, den)))
            else none,
        )
        for key, num, den, none in _LOOPS
    }
    return Comparison(
        arm=arm,
        reference=reference,
        paired_tasks=n_tasks,
        gap=gaps,
        gap_default=g_default,
        gap_amplification=amp,
        gap_growth=growth,
        channel_amplification=channel_amp,
        amplified_channels=[],
        failed_calls=failed_calls,
        spearman_rho=rho,
        spearman_ci_low=rho_lo,
        spearman_ci_high=rho_hi,
        spearman_note_code=rho_why,
        hallucinated_names_union=len(union),
        novel_fraction=novel,
        novel_names=novel_names,
        success_difference=Interval(
            value=g_default.gap, ci_low=g_default.ci_low, ci_high=g_default.ci_high
        ),
        test=TEST,
        p_value=p_value,
        tost_equivalent=bool(equivalent),
        tost_p=tost_p,
        tost_margin=settings.tost_margin,
        budget_tests=tests,
        trajectory_difference=traj,
        recovery_difference=recovery,
        repeat_difference=loops["repeat"],
        reissue_difference=loops["reissue"],
    )


def evidence(
    c: Comparison, settings: AnalysisSettings, channels: list[str] | None = None
) -> Evidence:
    """What the verdict rule reads from a comparison; `channels` (the gate's `--channels`)
    restricts which amplified or new channels count (None: all, and all failed calls)."""
    g = c.gap_growth
    counted = [ch for ch in c.amplified_channels if channels is None or ch in channels]
    total = c.failed_calls
    new = {
        ch: a.count_arm
        for ch, a in c.channel_amplification.items()
        if a.count_ref == 0 < a.count_arm
        and a.p_value is None  # new and untested (the sign test over tasks tests the rest)
        and (channels is None or ch in channels)
    }
    budgets = c.budget_tests or [default_test(c)]
    return Evidence(
        margin=c.tost_margin,
        alpha=settings.alpha,
        budgets=budgets,
        more_failed_calls=channels is None and total is not None and total.amplified,
        amplified_channels=counted,
        gap_grows=g.ci_low is not None and g.ci_low > 0 and g.value is not None,
        new_channels=new,
        paired_tasks=c.paired_tasks,
        min_tasks=settings.bootstrap_min_tasks,
    )


def default_test(c: Comparison) -> BudgetTest:
    """The default budget's test from the comparison's own fields (an analysis.json written
    before `budget_tests` existed: TOST stands in for the one-sided bound)."""
    return tests_at(
        c.gap_default,
        p_value=c.p_value,
        p_adjusted=c.p_adjusted,
        significant=c.significant,
        tost_p=c.tost_p,
        equivalent=c.tost_equivalent,
        drop_ruled_out=c.tost_equivalent,
    )


def tests_at(gap: GapPoint, **tests: Any) -> BudgetTest:
    """The budget's `tests` beside Gap(K) and its interval, as the gap point has them."""
    return BudgetTest(K=gap.K, gap=gap.gap, ci_low=gap.ci_low, ci_high=gap.ci_high, **tests)


def budget_test(d: np.ndarray, gap: GapPoint, settings: AnalysisSettings) -> BudgetTest:
    """Gap(K)'s tests on the per-task differences `d` (uncorrected; `finalize` corrects)."""
    tost_p, equivalent = paired_tost(d, settings.tost_margin, settings.alpha)
    _, bound = paired_difference_interval(d, 1 - 2 * settings.alpha)
    return tests_at(
        gap,
        p_value=float(paired_test(d)),
        tost_p=float(tost_p),
        equivalent=bool(equivalent),
        drop_bound=bound,
        drop_ruled_out=bound is not None and bound < settings.tost_margin,
    )


def finalize(
    c: Comparison,
    p_holm: float | None,
    p_bh: float | None,
    correction: Correction,
    settings: AnalysisSettings,
    tight_adjusted: float | None = None,
) -> Comparison:
    """The comparison with the study-wide adjusted p-values, significance and verdict
    (`tight_adjusted`: the tight budget's p, corrected over the study's comparisons)."""
    p_adj = p_holm if correction == "holm" else p_bh
    significant = p_adj is not None and p_adj < settings.alpha
    tests = [
        t.model_copy(update={"p_adjusted": p, "significant": p is not None and p < settings.alpha})
        for t, p in zip(c.budget_tests, [p_adj, tight_adjusted], strict=False)
    ]
    done = c.model_copy(
        update={
            "p_holm": p_holm,
            "p_bh": p_bh,
            "p_adjusted": p_adj,
            "significant": significant,
            "budget_tests": tests,
        }
    )
    return done.model_copy(update={"verdict": decide_verdict(evidence(done, settings)).verdict})


def worst(comparisons: Sequence[Comparison]) -> Comparison:
    """The comparison whose verdict a cell takes: the worst verdict, and among equal
    verdicts the largest success drop."""
    return min(comparisons, key=_severity)


def _severity(c: Comparison) -> tuple[int, float, str]:
    """Worst verdict first; among equal verdicts the largest success drop."""
    return (
        VERDICT_ORDER.index(c.verdict or "nothing to compare"),
        -(c.gap_default.gap or 0),
        c.arm,
    )
