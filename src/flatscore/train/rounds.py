"""An on-policy round's measurement: the reference's numbers on the whole test set against
the round targets (docs/embedded.md, "On-policy rounds"), from the analysis' own
definitions (`flatscore.analysis.analyze`, task-weighted): success, recovery from its own
failed calls, the share of failed calls that repeat the call that had just failed, and
S(9) − S(0); beside them the counts that say how the agent fails (calls, failed calls, calls
re-issuing one that had succeeded, episodes ended at the step cap)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from flatscore.analysis.settings import AnalysisSettings
from flatscore.domains import domain_names, get_domain
from flatscore.episode import Episode, TerminationReason
from flatscore.errors import InputError
from flatscore.report.markdown_table import table_lines

RECOVERY_TARGET = 0.35
REPEAT_TARGET = 0.30
SUCCESS_TARGET = 0.60
MASKING_TARGET = 8.0  # points of S(9) − S(0), in at least one domain
BUDGETS = list(range(10))


class RoundRow(BaseModel):
    """One domain's numbers for one arm."""

    model: str
    domain: str
    arm: str
    episodes: int
    tasks: int
    test_tasks: int | None
    """The domain's test split (None: not a built-in domain)."""
    success: float | None
    recovery: float | None
    repeat_share: float | None
    s0: float | None
    s9: float | None
    agent_calls: int = 0
    failed_calls: int = 0
    reissued_calls: int = 0
    """Agent calls repeating a call that had succeeded earlier in the episode."""
    step_cap: int = 0
    """Episodes ended at the study's step limit (`max_steps`)."""

    @property
    def masking(self) -> float | None:
        """S(9) − S(0) in points."""
        return None if self.s0 is None or self.s9 is None else 100 * (self.s9 - self.s0)

    @property
    def whole(self) -> bool:
        """Every test task, one trial each: a run stopped early does not count."""
        return self.test_tasks is not None and self.tasks == self.test_tasks == self.episodes


def round_rows(runs: Sequence[Path], arm: str = "ref", trials: str | None = None) -> list[RoundRow]:
    """The numbers of `arm` in each (model, domain) cell of the episodes in `runs` (run
    files, folders of them, or run archives: `flatscore archive pack`'s folders);
    `trials` as `flatscore analyze --trials` (`1`: the first)."""
    from flatscore.analysis.analyze import analyze
    from flatscore.formats import load_runs
    from flatscore.store.archive import archived, chunks

    episodes: list[Episode] = []
    for path in runs:
        if not path.is_dir():
            episodes += load_runs([path])
            continue
        files = sorted(path.glob("*.jsonl"))
        packed = [] if files else [p for paths in chunks(path).values() for p in paths]
        if not files and not packed:
            raise InputError("holds no run files (*.jsonl) and no run archive", file=str(path))
        episodes += load_runs(files) if files else [e for e, _ in archived(packed)]
    settings = AnalysisSettings.model_validate({"budgets": BUDGETS, "trials": trials})
    result = analyze(episodes, settings)
    rows = []
    for cell in result.cells:
        stats = next((a for a in cell.arms if a.arm == arm), None)
        if stats is None:
            continue
        curve = {p.K: p.success_rate for p in stats.budget_curve}
        test = len(get_domain(cell.domain).tasks("test")) if cell.domain in domain_names() else None
        rows.append(
            RoundRow(
                model=cell.model,
                domain=cell.domain,
                arm=arm,
                episodes=stats.episodes,
                tasks=stats.tasks,
                test_tasks=test,
                success=stats.success_rate,
                recovery=stats.recovery_rate,
                repeat_share=stats.repeat_share,
                s0=curve.get(0),
                s9=curve.get(9),
                agent_calls=stats.agent_tool_calls,
                failed_calls=stats.failed_agent_calls,
                reissued_calls=stats.reissued_calls,
                step_cap=stats.termination_reasons.get(TerminationReason.MAX_STEPS, 0),
            )
        )
    if not rows:
        raise InputError(f"no episode of arm {arm!r} in the runs", field="--arm")
    return rows


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


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
                _pct(r.success) + _mark(None if r.success is None else r.success >= SUCCESS_TARGET),
                _pct(r.recovery)
                + _mark(None if r.recovery is None else r.recovery >= RECOVERY_TARGET),
                _pct(r.repeat_share)
                + _mark(None if r.repeat_share is None else r.repeat_share <= REPEAT_TARGET),
                _pct(r.s0),
                _pct(r.s9),
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
    missed = [
        f"{r.domain} {name}"
        for r in rows
        for name, ok in (
            ("success", (r.success or 0) >= SUCCESS_TARGET),
            ("recovery", (r.recovery or 0) >= RECOVERY_TARGET),
            ("repeats", r.repeat_share is not None and r.repeat_share <= REPEAT_TARGET),
        )
        if not ok
    ]
    if not any((r.masking or 0) >= MASKING_TARGET for r in rows):
        missed.append("S(9) − S(0) in every domain")
    return "targets met" if not missed else "targets not met: " + ", ".join(missed)
