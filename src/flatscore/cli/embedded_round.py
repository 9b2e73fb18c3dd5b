"""An on-policy round's numbers against the round targets, in words (`flatscore
embedded-round`; the numbers: `flatscore.train.rounds`)."""

from __future__ import annotations

from collections.abc import Sequence

from flatscore.cli.embedded_card_runs import percent
from flatscore.report.markdown_table import table_lines
from flatscore.train.rounds import (
    MASKING_TARGET,
    RECOVERY_TARGET,
    REPEAT_TARGET,
    SUCCESS_TARGET,
    RoundRow,
)


def _mark(ok: bool | None) -> str:
    return "" if ok is None else (" ✓" if ok else " ✗")


def round_table(rows: Sequence[RoundRow]) -> list[str]:
    """The rows against the targets (✓ met, ✗ not), and one verdict line."""
    table = []
    for r in rows:
        table.append(
            [
                r.model,
                r.domain,
                f"{r.episodes} episodes, {r.tasks} of {r.test_tasks or '?'} tasks"
                + ("" if r.whole else " (not the whole test set once)"),
                percent(r.success) + _mark(r.targets["success"]),
                percent(r.recovery) + _mark(r.targets["recovery"]),
                percent(r.repeat_share) + _mark(r.targets["repeats"]),
                percent(r.s0),
                percent(r.s9),
                "–" if r.masking is None else f"{r.masking:.1f}",
            ]
        )
    head = [
        "model",
        "domain",
        "scope",
        f"success (≥ {SUCCESS_TARGET:.0%})",
        f"recovery (≥ {RECOVERY_TARGET:.0%})",
        f"repeats (≤ {REPEAT_TARGET:.0%})",
        "S(0)",
        "S(9)",
        f"S(9) − S(0) (≥ {MASKING_TARGET:g} in one domain)",
    ]
    counts = [
        [
            r.model,
            r.domain,
            f"{r.failed_calls} / {r.agent_calls}",
            str(r.reissued_calls),
            str(r.step_cap),
        ]
        for r in rows
    ]
    counts_head = [
        "model",
        "domain",
        "failed / agent calls",
        "calls re-issuing a call that had succeeded",
        "episodes ended at the step cap",
    ]
    return [
        *table_lines(head, table, "lll"),
        "",
        *table_lines(counts_head, counts, "llr"),
        "",
        verdict(rows),
    ]


def verdict(rows: Sequence[RoundRow]) -> str:
    """Whether every target holds, on whole test sets."""
    if not all(r.whole for r in rows):
        return "not judged: a domain is not the whole test set, one trial per task"
    missed = [f"{r.domain} {name}" for r in rows for name, ok in r.targets.items() if not ok]
    if not any((r.masking or 0) >= MASKING_TARGET for r in rows):
        missed.append("S(9) − S(0) in every domain")
    return "targets met" if not missed else "targets not met: " + ", ".join(missed)
