"""The lines a study run prints as it goes (`flatscore run`, `flatscore demo --fresh`): a
sequential run's decisions at each look, each comparison's state at the end, the episodes
run ahead of their look, and the run's last line. The run keeps the counts and the
decisions as data (`run.sequential.CellState`, `run.look_ahead.LookAhead`, `RunCounts`);
these are its words, so they read the same wherever a run prints them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def decided_line(
    model: str, domain: str, arm: str, reference: str, verdict: str, tasks: int, max_tasks: int
) -> str:
    """'m · retail · int4 vs ref: no damage detected after 12 of 40 tasks': a comparison
    decided at a look."""
    return (
        f"{model} · {domain} · {arm} vs {reference}: {verdict} after {tasks} of {max_tasks} tasks"
    )


def state_line(
    model: str, domain: str, decided: Mapping[str, tuple[str, int]], open_arms: Iterable[str]
) -> str:
    """One cell's comparisons when a sequential run ends: those decided (arm → verdict and
    the paired tasks read at the decision) and those still open."""
    done = ", ".join(f"{a} {v} at {n}" for a, (v, n) in sorted(decided.items()))
    still = ", ".join(sorted(open_arms)) or "none"
    return f"{model} · {domain}: decided: {done or 'none'}; open: {still}"


def ran_ahead_line(ran_ahead: int, discarded: int, restored: int, held: int) -> str:
    """What became of the episodes a sequential run ran ahead of their look."""
    return (
        f"ran ahead of their look: {ran_ahead} episodes written once the look "
        f"was read, {discarded} discarded (their arm was decided first), "
        f"{restored} kept from a stopped run, {held} held for a "
        "look not yet read"
    )


def outcome_line(
    written: int, skipped: int, seconds: float, terminations: Mapping[str, int], rerun: int
) -> str:
    """A run's last line before its verdicts: episodes run and skipped, the time, how the
    episodes ended, and those run again after an infrastructure error."""
    return (
        f"{written} episodes run, {skipped} already there "
        f"({seconds:.0f} s); terminations {terminations}"
        + (f"; {rerun} run again after an infrastructure error" if rerun else "")
    )
