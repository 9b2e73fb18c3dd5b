"""Coverage of the success-difference interval and the size of TOST, by simulation.

For 4, 6, 10, 30 and 114 tasks, with one trial and with four trials per task, 2,000
simulated studies per setting: the nominal 95% interval must cover the true task-weighted gap
in ≥ 93% of studies (true gaps 0 and 10 points), and equivalence within ±7.5 points must be
claimed in ≤ 5% of studies whose true gap is exactly 7.5 points. (The table also shows how
often equivalence is shown when the true gap is 0: the price of an interval that is honest
with few tasks, and conservative with several trials.)

Model: task solve probabilities q ~ Beta(4·s, 4·(1 − s)) (s = 0.6 and 0.9); the arm solves
with q·(1 − gap/s), so the expected gap over tasks is `gap`. Two pairings: independent
(reference and arm trials drawn apart) and coupled (one uniform per trial pair: the arm only
fails where the reference nearly does — few discordant tasks, the case that collapses a
bootstrap). The table in docs/analysis.md is `coverage_table()` printed by
`python tests/analysis/test_coverage.py`.
"""

from __future__ import annotations

import numpy as np

from flatscore.analysis.paired_score import score_interval, score_tost

TASKS = (4, 6, 10, 30, 114)
TRIALS = (1, 4)
STUDIES = 2000
MARGIN = 0.075


def simulate(
    rng: np.random.Generator, tasks: int, trials: int, gap: float, s: float, coupled: bool
) -> np.ndarray:
    """(STUDIES × tasks) per-task differences ref − arm."""
    q = rng.beta(4 * s, 4 * (1 - s), (STUDIES, tasks, 1))
    arm_q = q * (1 - gap / s)
    if coupled:
        u = rng.random((STUDIES, tasks, trials))
        ref, arm = u < q, u < arm_q
    else:
        ref = rng.random((STUDIES, tasks, trials)) < q
        arm = rng.random((STUDIES, tasks, trials)) < arm_q
    return ref.mean(axis=2) - arm.mean(axis=2)


def coverage_table(seed: int = 2026) -> list[dict[str, float | int | str]]:
    rng = np.random.default_rng(seed)
    rows: list[dict[str, float | int | str]] = []
    for coupled in (False, True):
        for s in (0.6, 0.9):
            for trials in TRIALS:
                for tasks in TASKS:
                    row: dict[str, float | int | str] = {
                        "pairing": "coupled" if coupled else "independent",
                        "success": s,
                        "trials": trials,
                        "tasks": tasks,
                    }
                    for gap in (0.0, 0.10):
                        lo, hi = score_interval(simulate(rng, tasks, trials, gap, s, coupled))
                        row[f"cover_{round(100 * gap)}"] = float(np.mean((lo <= gap) & (gap <= hi)))
                    d = simulate(rng, tasks, trials, MARGIN, s, coupled)
                    row["equivalent_at_margin"] = float(np.mean(score_tost(d, MARGIN)[1]))
                    d = simulate(rng, tasks, trials, 0.0, s, coupled)
                    row["equivalent_at_zero"] = float(np.mean(score_tost(d, MARGIN)[1]))
                    rows.append(row)
    return rows


def test_coverage_and_tost_size_at_every_study_size() -> None:
    rows = coverage_table()
    bad = [
        r
        for r in rows
        if float(r["cover_0"]) < 0.93
        or float(r["cover_10"]) < 0.93
        or float(r["equivalent_at_margin"]) > 0.05
    ]
    assert not bad, bad
    assert len(rows) == 2 * 2 * len(TRIALS) * len(TASKS)


if __name__ == "__main__":
    print(
        "| pairing | s | trials | tasks | covers gap 0 | covers gap 10 | "
        "equivalent (±7.5) at gap 7.5 | equivalent (±7.5) at gap 0 |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in coverage_table():
        print(
            f"| {r['pairing']} | {r['success']} | {r['trials']} | {r['tasks']} | "
            f"{100 * float(r['cover_0']):.1f}% | {100 * float(r['cover_10']):.1f}% | "
            f"{100 * float(r['equivalent_at_margin']):.1f}% | "
            f"{100 * float(r['equivalent_at_zero']):.1f}% |"
        )
