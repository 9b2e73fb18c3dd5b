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
    def targets(self) -> dict[str, bool | None]:
        """Whether each per-domain target holds (None: no value), by name."""
        return {
            "success": None if self.success is None else self.success >= SUCCESS_TARGET,
            "recovery": None if self.recovery is None else self.recovery >= RECOVERY_TARGET,
            "repeats": None if self.repeat_share is None else self.repeat_share <= REPEAT_TARGET,
        }

    @property
    def whole(self) -> bool:
        """Every test task, one trial each: a run stopped early does not count."""
        return self.test_tasks is not None and self.tasks == self.test_tasks == self.episodes


def round_rows(runs: Sequence[Path], arm: str = "ref", trials: str | None = None) -> list[RoundRow]:
    """The numbers of `arm` in each (model, domain) cell of the episodes in `runs` (run
    files, folders of them, or run archives: `flatscore archive pack`'s folders);
    `trials` as `flatscore analyze --trial-range` (`1`: the first)."""
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
