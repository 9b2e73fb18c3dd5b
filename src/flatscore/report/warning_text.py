"""The analysis' own warnings in words: episodes a narrowed read left out (`--trial-range`,
`--balanced`), τ² results read by its conventions, error budgets that differ or stop S(K)
from being recomputed. The analysis keeps them as data (`analysis.notices.Notice`);
analysis.json's `warnings`, the terminal and the gate's warnings carry these words
(`analysis_text.worded`, `gate_text.worded_gate`)."""

from __future__ import annotations

from flatscore.analysis.notices import Notice
from flatscore.analysis.trials import trials_text


def warning(n: Notice) -> str:
    """One notice in words."""
    if n.kind == "trials_left_out":
        return (
            f"--trial-range {trials_text(n.trials)}: {n.count} of {n.total} episodes of other "
            "trials left out"
        )
    if n.kind == "balanced_left_out":
        return (
            f"--balanced: {n.count} of {n.total} episodes left out (a (domain, task, trial) "
            "that some arm of its cell lacks)"
        )
    if n.kind == "tau2_inferred_errors":
        return (
            f"{n.count} τ² tool result(s) had no error flag and were counted as failed because "
            "their text starts with 'Error:' (τ²'s convention)"
        )
    if n.kind == "tau2_trial_from_order":
        return f"{n.count} τ² simulation(s) had no trial number: numbered per task in file order"
    if n.kind == "mixed_budgets":
        return (
            "episodes ran under different error budgets; default K uses the smallest "
            f"(max_errors = {n.budget})"
        )
    if n.kind == "not_recomputable":
        return (
            f"S(K) for K ≥ {n.budget} is not recomputable: episodes stopped at max_errors = "
            f"{n.budget} (values there are lower bounds, marked recomputable: false)"
        )
    assert n.kind == "agent_count_understated"
    return (
        "--count agent on episodes cut by a budget that counted user errors too: S(K) may be "
        "understated for those episodes"
    )


def warnings(notices: list[Notice]) -> list[str]:
    """The notices in words, in order."""
    return [warning(n) for n in notices]
