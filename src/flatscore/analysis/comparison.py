"""One arm against its cell's reference, and the verdict (docs/analysis.md, "Definitions" and
"Statistical choices").

Success differences (Gap(K), gap growth) get the paired success-difference interval
(`paired_score`: t on per-task differences, the score interval with few discordant tasks) at
every study size; the paired test and TOST use the same statistic. Statistics with no
small-sample interval (channel ratios, Spearman ρ, trajectory and recovery differences) get a
task-bootstrap interval only when the cell has at least `bootstrap_min_tasks` paired tasks;
below that their intervals are null with a note, and nothing is called amplified.
"""

from __future__ import annotations

from collections import Counter
from typing import Literal

import numpy as np

from flatscore.analysis.channels import CHANNELS
from flatscore.analysis.facts import TRAJECTORY_METRICS
from flatscore.analysis.invariance import novel_fraction, rowwise_spearman, spearman_rho
from flatscore.analysis.paired_score import (
    METHOD,
    TEST,
    paired_difference_interval,
    paired_interval,
    paired_test,
    paired_tost,
)
from flatscore.analysis.result import (
    ChannelAmplification,
    Comparison,
    GapAmplification,
    GapPoint,
    Interval,
    Verdict,
)
from flatscore.analysis.settings import AnalysisSettings
from flatscore.analysis.stats import p_is, percentile_ci, ratio
from flatscore.analysis.task_matrix import MALFORMED, TaskMatrix

VERDICT_ORDER: tuple[Verdict, ...] = (
    "visible damage",
    "flat score, amplified failures",
    "inconclusive",
    "no damage detected",
    "nothing to compare",
)


def points(x: float, signed: bool = True) -> str:
    """A difference of fractions, in points: 0.375 → '+37.5 points'."""
    return f"{100 * x:{'+' if signed else ''}.1f} points"


def few_tasks_note(n: int, minimum: int) -> str:
    return f"{n} paired task(s): too few for a bootstrap interval (needs ≥ {minimum})"


def _boot_interval(
    point: float | None, boot: np.ndarray | None, conf: float, note: str | None
) -> Interval:
    if point is None or not np.isfinite(point):
        return Interval(value=None, note=note or "undefined on these episodes")
    if boot is None:
        return Interval(value=float(point), note=note)
    lo, hi = percentile_ci(boot, conf)
    return Interval(value=float(point), ci_low=lo, ci_high=hi, note=note)


def _finite(x: float | None) -> float | None:
    return float(x) if x is not None and np.isfinite(x) else None


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
    few = None if weights is not None else few_tasks_note(n_tasks, settings.bootstrap_min_tasks)

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
    if g_default.gap == 0:
        amp = GapAmplification(
            k_small=k_small,
            k_default=default_k,
            value=None,
            note="Gap(K_default) is 0: the ratio does not exist (see gap_growth)",
        )
    else:
        amp = GapAmplification(
            k_small=k_small, k_default=default_k, value=g_small.gap / g_default.gap
        )
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

    channel_amp: dict[str, ChannelAmplification] = {}
    for ch in CHANNELS:
        den = "attempts" if ch == MALFORMED else "calls"
        r_ref, r_arm = float(rate(R, ch, den)), float(rate(A, ch, den))
        c_ref = round(float((ref.column(ch) * ref.episodes).sum()))
        c_arm = round(float((alt.column(ch) * alt.episodes).sum()))
        point = r_arm / r_ref if np.isfinite(r_ref) and r_ref > 0 and np.isfinite(r_arm) else None
        lo = hi = None
        if point is not None and BR is not None and BA is not None:
            with np.errstate(divide="ignore", invalid="ignore"):
                boot = rate(BA, ch, den) / rate(BR, ch, den)
            lo, hi = percentile_ci(boot, conf)
        note = None
        if point is None:
            note = (
                f"new in the arm: the reference never failed this way, the arm did {c_arm} time(s)"
                if c_ref == 0 and c_arm > 0
                else "no failures in this channel in either arm"
                if c_ref == 0
                else "no agent tool calls"
            )
        elif few is not None:
            note = few
        channel_amp[ch] = ChannelAmplification(
            ratio=point,
            ci_low=lo,
            ci_high=hi,
            count_ratio=c_arm / c_ref if c_ref else None,
            count_arm=c_arm,
            count_ref=c_ref,
            rate_arm=_finite(r_arm),
            rate_ref=_finite(r_ref),
            amplified=lo is not None and lo > 1.0,
            note=note,
        )
    amplified = [ch for ch, c in channel_amp.items() if c.amplified]

    names = list(ref.names)
    ref_counts = (ref.name_means * ref.episodes[:, None]).sum(axis=0)
    arm_counts = (alt.name_means * alt.episodes[:, None]).sum(axis=0)
    ref_names = Counter({n: round(c) for n, c in zip(names, ref_counts, strict=True) if c})
    arm_names = Counter({n: round(c) for n, c in zip(names, arm_counts, strict=True) if c})
    union = sorted(set(ref_names) | set(arm_names))
    rho, rho_note = spearman_rho(ref_names, arm_names)
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
        rho_note = few
    novel, novel_names = novel_fraction(ref_names, arm_names)

    d_default = diff(default_k)
    p_value = float(paired_test(d_default))
    tost_p, equivalent = paired_tost(d_default, settings.tost_margin, settings.alpha)

    def boot_diff(num: str, den: str) -> np.ndarray | None:
        if BR is None or BA is None:
            return None
        return rate(BA, num, den) - rate(BR, num, den)

    traj = {
        m: _boot_interval(
            float(rate(A, f"traj_{m}", "task") - rate(R, f"traj_{m}", "task")),
            boot_diff(f"traj_{m}", "task"),
            conf,
            few,
        )
        for m in TRAJECTORY_METRICS
    }
    rec_point = float(rate(A, "recovered", "agent_failed") - rate(R, "recovered", "agent_failed"))
    recovery = _boot_interval(
        _finite(rec_point),
        boot_diff("recovered", "agent_failed"),
        conf,
        few if np.isfinite(rec_point) else "an arm has no failed agent calls",
    )
    return Comparison(
        arm=arm,
        reference=reference,
        paired_tasks=n_tasks,
        interval_method=(
            METHOD
            + "; "
            + (few or f"other intervals: task bootstrap, {settings.bootstrap} resamples")
        ),
        gap=gaps,
        gap_default=g_default,
        gap_amplification=amp,
        gap_growth=growth,
        channel_amplification=channel_amp,
        amplified_channels=amplified,
        spearman_rho=rho,
        spearman_ci_low=rho_lo,
        spearman_ci_high=rho_hi,
        spearman_note=rho_note,
        hallucinated_names_union=len(union),
        novel_fraction=novel,
        novel_names=novel_names,
        success_difference=Interval(
            value=g_default.gap, ci_low=g_default.ci_low, ci_high=g_default.ci_high
        ),
        test=TEST,
        p_value=p_value,
        tost_equivalent=bool(equivalent),
        tost_p=float(tost_p),
        tost_margin=settings.tost_margin,
        trajectory_difference=traj,
        recovery_difference=recovery,
    )


def verdict(c: Comparison, significant: bool, margin: float) -> tuple[Verdict, str]:
    """The comparison's verdict and the numbers that decided it (in points)."""
    gap = c.gap_default.gap or 0.0
    p_text = p_is(c.p_adjusted, "adjusted p") if c.p_adjusted is not None else "no test"
    lo, hi = c.gap_default.ci_low, c.gap_default.ci_high
    ci_text = (
        f"95% CI {100 * lo:+.1f} to {100 * hi:+.1f} points"
        if lo is not None and hi is not None
        else "no interval"
    )
    m_text = points(margin, signed=False)
    if significant and gap > 0:
        return "visible damage", (
            f"significant success drop at default K: {points(gap)} ({ci_text}, {p_text})"
        )
    if not significant and gap > margin:
        return "inconclusive", (
            f"success drop {points(gap)} is beyond the ±{m_text} equivalence margin but not "
            f"significant ({ci_text}, {p_text}): too few tasks to tell"
        )
    tost = (
        f"equivalent within ±{m_text} (TOST)"
        if c.tost_equivalent
        else f"equivalence within ±{m_text} not shown (TOST {p_is(c.tost_p)})"
    )
    significance = (
        f"a significant gain ({ci_text}, {p_text})"
        if significant
        else f"not significant ({ci_text}, {p_text}); {tost}"
    )
    reasons = []
    if c.amplified_channels:
        reasons.append("amplified channel(s): " + ", ".join(c.amplified_channels))
    g = c.gap_growth
    if g.ci_low is not None and g.ci_low > 0 and g.value is not None:
        reasons.append(f"gap grows at K={c.gap_amplification.k_small} ({points(g.value)})")
    if reasons:
        return "flat score, amplified failures", (
            f"success difference {points(gap)} {significance}; " + "; ".join(reasons)
        )
    if not significant and hi is not None and hi > margin:
        return "inconclusive", (
            f"success difference {points(gap)}, {significance}: the interval still allows a "
            f"drop beyond ±{m_text}, too few tasks to tell"
        )
    return "no damage detected", (
        f"success difference {points(gap)} {significance}; no channel amplified, "
        "no gap growth at small K"
    )


def finalize(
    c: Comparison,
    p_holm: float | None,
    p_bh: float | None,
    correction: Literal["holm", "bh"],
    settings: AnalysisSettings,
) -> Comparison:
    """The comparison with the study-wide adjusted p-values, significance and verdict."""
    p_adj = p_holm if correction == "holm" else p_bh
    significant = p_adj is not None and p_adj < settings.alpha
    done = c.model_copy(
        update={"p_holm": p_holm, "p_bh": p_bh, "p_adjusted": p_adj, "significant": significant}
    )
    v, why = verdict(done, significant, settings.tost_margin)
    return done.model_copy(update={"verdict": v, "verdict_reason": why})
