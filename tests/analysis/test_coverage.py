"""Calibration of the success-difference interval and of TOST, by simulation (issue 26).

Every condition of 4 / 6 / 10 / 30 / 114 tasks × 1 and 4 trials × independent and coupled
trials × true gaps 0, 5, 7.5, 10 and 20 points × three difficulty profiles (Beta(4·s,
4·(1 − s)) at s = 0.6 and 0.9, and Beta(0.9, 0.9): strong task heterogeneity), 2,000 studies
each:

- coverage of the 95% interval ≥ 93.0% everywhere, and ≤ 97.5% from 30 tasks up;
- from 30 tasks up, mean width ≤ 1.15× the interval computed with the true variance
  (2 · 1.96 · σ / √n, σ exact from the model);
- below 30 tasks, mean width no wider than the interval it replaces (Tango's score interval
  with ½ continuity correction, valid but conservative);
- from 30 tasks up, where the interval covers more than 97.5% or is wider than 1.15× the
  true-variance interval, issue 26's rule: no wider than an exact method's. With one trial
  per task the yardstick is the **exact unconditional interval** (`flatscore.analysis.
  exact_paired`: Tango's statistic, the p-value maximised over the nuisance discordance rate,
  Berger–Boos; coverage ≥ 95% for every truth), on the first `EXACT_STUDIES` studies of the
  condition: our mean width there must be ≤ its mean width × (1 + `EXACT_TOLERANCE`);
- TOST ±7.5 at 114 × 4: with no gap, equivalent in ≥ 80% of studies or within 5 points of
  what the true-variance TOST can reach (at 60% success with independent trials no test can
  reach 80%: the true-variance TOST gets 65%, `test_tost_power_is_what_the_true_variance_
  allows`); with a true gap equal to the margin, in ≤ 5% (`test_tost_size_at_the_margin`,
  on `SIZE_STUDIES` studies per setting: 2,000 resolve a rate of 5% only to ±1 point).

Still exempt from the upper-coverage and width bounds (but not from ≥ 93%): conditions with
several trials per task and fewer than 12 discordant tasks per study on average (2 ×
`DISCORDANT_MIN`; the table marks them `sparse`) — `EXEMPT_AT_MOST` of them. No valid exact
method for fractional per-task differences is implemented: the exact sign-flip interval
(printed by `--full`) is exact only for differences symmetric about the truth, and it
under-covers once a gap makes them one-sided (86% at 30 × 1 trial, coupled, 90% success,
gap 5), so it is shown, never a yardstick.

Model: task solve probabilities q ~ Beta(4·s, 4·(1 − s)), s = 0.6 and 0.9; the arm solves
with q·(1 − gap/s), so the expected gap is `gap`. Trials: independent (fresh uniforms per arm)
or coupled (each arm trial reuses its reference trial's uniform with probability 0.75, as
with common random numbers where quantization changes some episodes; at 114 × 4, 60% success,
this gives the 81% TOST rate the old score interval had in issue 26). `python
tests/analysis/test_coverage.py` prints the table in docs/analysis.md.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from scipy.stats import binomtest, norm

from exact_paired import exact_unconditional_intervals, sign_flip_intervals
from flatscore.analysis.paired_score import (
    DISCORDANT_MIN,
    paired_interval,
    paired_tost,
    score_interval,
)

TASKS = (4, 6, 10, 30, 114)
TRIALS = (1, 4)
COUPLINGS = {"independent": 0.0, "coupled": 0.75}
GAPS = (0.0, 0.05, 0.075, 0.10, 0.20)
PROFILES = (0.6, 0.9)
HETEROGENEOUS = 0.5
CONCENTRATIONS = {HETEROGENEOUS: 1.8}
"""s = 0.5 with concentration 1.8 is Beta(0.9, 0.9): most tasks nearly always or nearly never
solved, the task heterogeneity of the committed studies. Its conditions are drawn after the
others', so theirs draw what they drew before it was added."""
ALL_PROFILES = (*PROFILES, HETEROGENEOUS)
STUDIES = 2000
EXACT_STUDIES = 250
"""Studies per condition on which the exact yardsticks are computed (the first ones)."""
EXACT_TOLERANCE = 0.01
"""Our mean width may exceed the exact unconditional interval's by 1% (both on the same
studies; the yardstick's p-value is a supremum over a grid of the nuisance, so it is if
anything slightly too narrow). Measured: 0.975–1.002×."""
EXEMPT_AT_MOST = 5
"""Conditions from 30 tasks up still exempt (several trials, sparse): the test fails if more
appear. Four on the two Beta(4·s, 4·(1 − s)) profiles, one (coupled, 30 × 4) on the
heterogeneous one."""
MARGIN = 0.075
CONCENTRATION = 4.0
SIZE_STUDIES = 20_000
"""Studies per setting for the TOST size at the margin: the Monte-Carlo standard error of a 5%
rate is then 0.15 points."""

Row = dict[str, float | int | str | bool]


def simulate(
    rng: np.random.Generator, tasks: int, trials: int, gap: float, s: float, coupling: float
) -> np.ndarray:
    """(STUDIES × tasks) per-task differences ref − arm."""
    c = CONCENTRATIONS.get(s, CONCENTRATION)
    q = rng.beta(c * s, c * (1 - s), (STUDIES, tasks, 1))
    u = rng.random((STUDIES, tasks, trials))
    v = np.where(rng.random(u.shape) < coupling, u, rng.random(u.shape))
    return (u < q).mean(axis=2) - (v < q * (1 - gap / s)).mean(axis=2)


def true_sd(trials: int, gap: float, s: float, coupling: float) -> float:
    """σ of a task's difference under the model, exactly: with r = 1 − gap/s, one trial pair
    has Var(x_ref − x_arm | q) = q(1 − q) + rq(1 − rq) − 2c·rq(1 − q) (c the coupling share),
    trials are independent given q, and E[d | q] = q·gap/s; Beta moments do the rest."""
    c = CONCENTRATIONS.get(s, CONCENTRATION)
    a, b = c * s, c * (1 - s)
    m1, m2 = a / (a + b), a * (a + 1) / ((a + b) * (a + b + 1))
    r, c = 1 - gap / s, coupling
    within = m1 * (1 + r - 2 * c * r) + m2 * (2 * c * r - 1 - r * r)
    return float(np.sqrt(within / trials + (gap / s) ** 2 * (m2 - m1 * m1)))


def condition(
    rng: np.random.Generator,
    pairing: str,
    s: float,
    trials: int,
    tasks: int,
    gap: float,
    compare_old: bool = False,
) -> Row:
    d = simulate(rng, tasks, trials, gap, s, COUPLINGS[pairing])
    lo, hi = paired_interval(d)
    sigma = true_sd(trials, gap, s, COUPLINGS[pairing])
    oracle = 2 * norm.ppf(0.975) * sigma / np.sqrt(tasks)
    width = float(np.mean(hi - lo))
    discordant = float((d != 0).sum(axis=1).mean())
    coverage = float(np.mean((lo <= gap + 1e-12) & (gap - 1e-12 <= hi)))
    row: Row = {
        "pairing": pairing,
        "success": s,
        "trials": trials,
        "tasks": tasks,
        "gap": gap,
        "coverage": coverage,
        "width": width,
        "width_ratio": width / oracle if oracle > 0 else float("nan"),
        "discordant": discordant,
        "sparse": discordant < 2 * DISCORDANT_MIN,
    }
    over = tasks >= 30 and (coverage > 0.975 or width > 1.15 * oracle)
    row["over"] = over
    head = d[:EXACT_STUDIES]
    if over or (compare_old and tasks < 30):
        row["width_same_studies"] = float(np.mean((hi - lo)[:EXACT_STUDIES]))
    if trials == 1 and over:  # the yardstick, asserted
        elo, ehi = exact_unconditional_intervals(head)
        row["exact_width"] = float(np.mean(ehi - elo))
        row["exact_coverage"] = float(np.mean((elo <= gap + 1e-12) & (gap - 1e-12 <= ehi)))
    if compare_old and (over or tasks < 30):  # printed beside, never asserted (docstring)
        slo, shi = sign_flip_intervals(head)
        row["flip_width"] = float(np.mean(np.nan_to_num(shi - slo)))
        row["flip_coverage"] = float(np.mean((slo <= gap + 1e-12) & (gap - 1e-12 <= shi)))
    if tasks < 30 or compare_old:  # the interval this one replaced
        old_lo, old_hi = score_interval(d, continuity=0.5)
        row["old_width"] = float(np.mean(old_hi - old_lo))
        row["old_coverage"] = float(np.mean((old_lo <= gap + 1e-12) & (gap - 1e-12 <= old_hi)))
    if tasks == 114 and trials == 4 and gap in (0.0, MARGIN):
        row["equivalent"] = float(np.mean(paired_tost(d, MARGIN)[1]))
        if compare_old:
            old_lo, old_hi = score_interval(d, 0.90, continuity=0.5)
            row["old_equivalent"] = float(np.mean((old_lo > -MARGIN) & (old_hi < MARGIN)))
        se = sigma / np.sqrt(tasks)
        reach = MARGIN - norm.ppf(0.95) * se  # the true-variance TOST: |mean| < reach
        row["oracle_equivalent"] = (
            float(norm.cdf((reach - gap) / se) - norm.cdf((-reach - gap) / se))
            if reach > 0
            else 0.0
        )
    return row


@functools.cache
def coverage_table(seed: int = 2026, compare_old: bool = False) -> list[Row]:
    rng = np.random.default_rng(seed)
    settings = [(p, s) for p in COUPLINGS for s in PROFILES]
    settings += [(p, HETEROGENEOUS) for p in COUPLINGS]
    return [
        condition(rng, pairing, s, trials, tasks, gap, compare_old)
        for pairing, s in settings
        for trials in TRIALS
        for tasks in TASKS
        for gap in GAPS
    ]


def failures(rows: list[Row]) -> list[str]:
    """Every bound of the module docstring that a row breaks, in words."""
    out = []
    for r in rows:
        name = f"{r['pairing']} s={r['success']} {r['tasks']}x{r['trials']} gap {r['gap']}"
        cov, big = float(r["coverage"]), int(r["tasks"]) >= 30
        if cov < 0.93:
            out.append(f"{name}: coverage {cov:.3f} < 0.93")
        if r["over"] and "exact_width" in r:  # one trial: no wider than the exact interval
            ours, exact = float(r["width_same_studies"]), float(r["exact_width"])
            if ours > exact * (1 + EXACT_TOLERANCE):
                out.append(f"{name}: width {ours:.4f} > the exact unconditional {exact:.4f}")
        elif r["over"] and not (r["sparse"] and int(r["trials"]) > 1):
            if cov > 0.975:
                out.append(f"{name}: coverage {cov:.3f} > 0.975")
            if float(r["width_ratio"]) > 1.15:
                out.append(f"{name}: width {float(r['width_ratio']):.2f}x the true-variance width")
        if not big and float(r["width"]) > float(r["old_width"]) + 1e-9:
            out.append(f"{name}: wider than the score interval with continuity correction")
        if "equivalent" in r:
            eq, oracle = float(r["equivalent"]), float(r["oracle_equivalent"])
            if r["gap"] == 0.0 and eq < min(0.80, oracle - 0.05):
                out.append(f"{name}: TOST equivalent in {eq:.3f} (true-variance TOST {oracle:.3f})")
    return out


def test_a_corner_of_the_grid_is_calibrated() -> None:
    """The fast suite's slice of the full grid below (slow tier): coupled trials at 90%
    success, 10 and 114 tasks × 1 and 4 trials, no gap and a gap at the margin, 2,000
    studies each, held to the same bounds."""
    rng = np.random.default_rng(2026)
    rows = [
        condition(rng, "coupled", 0.9, trials, tasks, gap)
        for trials in TRIALS
        for tasks in (10, 114)
        for gap in (0.0, MARGIN)
    ]
    assert not failures(rows), failures(rows)
    (no_gap,) = [r for r in rows if "equivalent" in r and r["gap"] == 0.0]
    assert float(no_gap["equivalent"]) >= 0.95


@pytest.mark.slow  # the whole grid, ~25 s; a corner of it runs in the fast suite (above)
def test_interval_and_tost_are_calibrated_at_every_study_size() -> None:
    rows = coverage_table()
    assert len(rows) == len(COUPLINGS) * len(ALL_PROFILES) * len(TRIALS) * len(TASKS) * len(GAPS)
    assert not failures(rows), failures(rows)
    exempt = [r for r in rows if r["over"] and "exact_width" not in r]
    assert len(exempt) <= EXEMPT_AT_MOST, [(r["pairing"], r["success"], r["tasks"]) for r in exempt]
    # The 114 x 4 TOST rates of issue 26's done-when, where the model allows them.
    tost = {
        (r["pairing"], r["success"], r["gap"]): float(r["equivalent"])
        for r in rows
        if "equivalent" in r
    }
    assert tost[("independent", 0.9, 0.0)] >= 0.80
    assert min(tost[("coupled", s, 0.0)] for s in ALL_PROFILES) >= 0.95


def tost_size(rng: np.random.Generator, pairing: str, s: float) -> tuple[int, int]:
    """(equivalent, studies) at 114 × 4 with the true gap at the margin, SIZE_STUDIES studies."""
    hits = 0
    for _ in range(SIZE_STUDIES // STUDIES):
        d = simulate(rng, 114, 4, MARGIN, s, COUPLINGS[pairing])
        hits += int(paired_tost(d, MARGIN)[1].sum())
    return hits, SIZE_STUDIES


def test_tost_size_at_the_margin() -> None:
    """With the true gap equal to the margin, TOST ±7.5 calls the arms equivalent in ≤ 5% of
    studies: the exact (Clopper–Pearson) 95% interval of the observed rate reaches 5%, in every
    setting. (The t statistic fails this: 6.0% at 90% success, coupled trials, where skewed
    differences make its one-sided tests liberal.)"""
    rng = np.random.default_rng(26)
    settings = [(p, s) for p in COUPLINGS for s in PROFILES] + [("independent", HETEROGENEOUS)]
    for pairing, s in settings:
        hits, studies = tost_size(rng, pairing, s)
        low = binomtest(hits, studies, 0.05).proportion_ci(0.95).low
        assert low <= 0.05, f"{pairing} s={s}: {hits}/{studies} equivalent at the margin"


def test_tost_power_is_what_the_true_variance_allows() -> None:
    """With no gap at 114 × 4, TOST ±7.5 is within 5 points of the best any test can do, the
    TOST that knows the true variance: |mean| < margin − z₀.₉₅·σ/√n, so its power is
    Φ((margin − z₀.₉₅·se)/se) − Φ(−(margin − z₀.₉₅·se)/se). Issue 26's 80% with independent
    trials is out of reach at 60% success (σ = 0.31: the true-variance TOST gets 65%)."""
    rng = np.random.default_rng(254)
    rows = [condition(rng, pairing, s, 4, 114, 0.0) for pairing in COUPLINGS for s in PROFILES]
    rows += [condition(rng, pairing, HETEROGENEOUS, 4, 114, 0.0) for pairing in COUPLINGS]
    for r in rows:
        best, ours = float(r["oracle_equivalent"]), float(r["equivalent"])
        assert ours >= best - 0.05, f"{r['pairing']} s={r['success']}: {ours} vs {best}"
    best = {(r["pairing"], r["success"]): float(r["oracle_equivalent"]) for r in rows}
    assert best[("independent", 0.6)] == pytest.approx(0.653, abs=0.005)  # below 80%
    sigma = true_sd(4, 0.0, 0.6, 0.0)
    se = sigma / np.sqrt(114)
    assert (MARGIN - norm.ppf(0.95) * se) / se < norm.ppf(0.9)  # 80% needs a smaller σ


def test_true_sd_matches_the_simulation() -> None:
    """The exact σ behind the width bound, against 200,000 simulated tasks."""
    rng = np.random.default_rng(7)
    for trials, gap, s, c in [(1, 0.0, 0.6, 0.0), (4, 0.1, 0.9, 0.75), (4, 0.2, 0.6, 0.0)]:
        d = simulate(rng, 100, trials, gap, s, c)
        assert float(d.std()) == pytest.approx(true_sd(trials, gap, s, c), rel=0.01)


def markdown(rows: list[Row]) -> str:
    lines = [
        "| pairing | s | trials | tasks | gap | coverage | width | × true-σ width "
        "| discordant tasks | old width | exact unconditional width (its coverage) "
        "| sign-flip width (its coverage) | TOST ±7.5 equivalent |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        exact = (
            f"{100 * float(r['exact_width']):.2f} ({100 * float(r['exact_coverage']):.1f}%; "
            f"ours {100 * float(r['width_same_studies']):.2f})"
            if "exact_width" in r
            else ""
        )
        flip = (
            f"{100 * float(r['flip_width']):.1f} ({100 * float(r['flip_coverage']):.1f}%)"
            if "flip_width" in r
            else ""
        )
        old = f"{100 * float(r['old_width']):.1f}" if "old_width" in r else ""
        tost = (
            f"{100 * float(r['equivalent']):.1f}% "
            f"(true σ: {100 * float(r['oracle_equivalent']):.1f}%)"
            if "equivalent" in r
            else ""
        )
        ratio = float(r["width_ratio"])
        lines.append(
            f"| {r['pairing']} | {r['success']} | {r['trials']} | {r['tasks']} "
            f"| {100 * float(r['gap']):g} | {100 * float(r['coverage']):.1f}% "
            f"| {100 * float(r['width']):.1f} | {'—' if np.isnan(ratio) else f'{ratio:.2f}'} "
            f"| {float(r['discordant']):.1f}{' sparse' if r['sparse'] else ''} "
            f"| {old} | {exact} | {flip} | {tost} |"
        )
    return "\n".join(lines)


def summary(rows: list[Row]) -> str:
    """One line per setting (pairing, s, trials, tasks) over the five gaps: the table in
    docs/analysis.md (with `compare_old`, the old interval's numbers beside)."""
    lines = [
        "| pairing | s | trials | tasks | coverage (5 gaps) | width, points | × true-σ width "
        "| discordant tasks | old: coverage | old: width |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    keys = sorted(
        {(r["pairing"], r["success"], r["trials"], r["tasks"]) for r in rows},
        key=lambda k: (list(COUPLINGS).index(str(k[0])), k[1], k[2], k[3]),
    )
    for key in keys:
        group = [r for r in rows if (r["pairing"], r["success"], r["trials"], r["tasks"]) == key]

        def span(field: str, scale: float = 100.0, fmt: str = ".1f", g: list[Row] = group) -> str:
            values = [scale * float(r[field]) for r in g if field in r]
            values = [v for v in values if not np.isnan(v)]
            if not values:
                return "—"
            return f"{min(values):{fmt}}–{max(values):{fmt}}"

        lines.append(
            f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {span('coverage')}% "
            f"| {span('width')} | {span('width_ratio', 1.0, '.2f')} "
            f"| {span('discordant', 1.0)} | {span('old_coverage')}% | {span('old_width')} |"
        )
    lines += ["", "| TOST ±7.5 at 114 × 4 | s | true gap | equivalent | true-σ TOST | old |"]
    lines.append("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        if "equivalent" in r:
            old = f"{100 * float(r['old_equivalent']):.1f}%" if "old_equivalent" in r else "—"
            lines.append(
                f"| {r['pairing']} | {r['success']} | {100 * float(r['gap']):g} "
                f"| {100 * float(r['equivalent']):.1f}% "
                f"| {100 * float(r['oracle_equivalent']):.1f}% | {old} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    table = coverage_table(compare_old=True)
    print(markdown(table) if "--full" in sys.argv else summary(table))
    print("\nbounds broken:", failures(table) or "none")
