"""`flatscore gate`: may the candidate replace the reference? (docs/gate.md)

The gate decides nothing on its own statistics or rule. The two runs are analysed as every
command analyses runs (`formats.pipeline.gate_labelled`: `prepare` here, then the pipeline's
`analyze_labelled`), with the gate's tight budget as the analysis' `tight_budget`, and
`gate` decides each cell from that analysis with the analysis' own rule
(`verdict_rule.decide` on the comparison's evidence, `--channels` restricting which channels
count): `analyze` and `report` say the same on the same runs. `verdict_rule.GATE_OF` maps
the analysis verdict to pass / damage / inconclusive; an inconclusive cell also gets the
power analysis (`analysis.power`): how many tasks (or trials) would detect a drop as large
as the margin.

The gate's verdict is the worst cell's: damage > inconclusive > pass.

Which comparisons it corrects over (`Family`): when its two inputs are one study's runs that
hold other arms too (one folder given as both, a reference file and the study's folder), it
analyses the whole study, every arm against the reference, so its corrections (Holm, the
sequential design's spending) are `report`'s on the same runs and it reads the candidate's
comparison from them; two separate runs are analysed alone (its own family).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

from pydantic import Field

from flatscore import defaults
from flatscore.analysis.channels import CHANNELS
from flatscore.analysis.comparison import evidence
from flatscore.analysis.notices import Notice
from flatscore.analysis.outputs import AnalysisModel
from flatscore.analysis.power import power_analysis
from flatscore.analysis.result import AnalysisResult, ArmStats, Cell, Comparison
from flatscore.analysis.sequential_result import SequentialComparison
from flatscore.analysis.settings import AnalysisSettings
from flatscore.analysis.verdict_rule import BudgetTest, GateVerdict, Verdict, decide
from flatscore.episode import Episode, ErrorBudget
from flatscore.errors import InputError

EXIT_CODES: dict[GateVerdict, int] = {"pass": 0, "damage": 3, "inconclusive": 4}
"""Exit codes of `flatscore gate` (2 is bad input and 1 a file-system error, as everywhere)."""
SEVERITY: tuple[GateVerdict, ...] = ("damage", "inconclusive", "pass")
SIZE_FACTORS = (1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
TRIAL_COUNTS = (2, 3, 4, 6, 8, 12, 16)
TARGET_POWER = 0.8


class GateOptions(AnalysisSettings):
    """What the gate checks: the analysis settings (one model: margin, tight budget, alpha,
    bootstrap, seed, count) and the gate's own choices. `default_budget` None takes the
    analysis' default (recorded max_errors − 1); `channels` None: every channel;
    `simulations`: the power analysis of an inconclusive cell."""

    default_budget: int | None = Field(None, ge=0)
    channels: list[str] | None = None
    simulations: int = Field(defaults.GATE_SIMULATIONS, ge=50)

    def analysis(self, reference: str, **changes: Any) -> AnalysisSettings:
        """The analysis settings the gate runs with (its own fields left out)."""
        mine = {"default_budget", "channels", "simulations"}
        values = {k: getattr(self, k) for k in type(self).model_fields if k not in mine}
        return AnalysisSettings.model_validate(values | {"reference": reference} | changes)


BudgetCheck = BudgetTest
"""The comparison's success statistics at one budget K (the analysis' own `BudgetTest`)."""


class MoreData(AnalysisModel):
    """What the power analysis says would decide an inconclusive cell: the smallest number
    of tasks (at the same trials) and of trials (at the same tasks) at which a drop of the
    margin's size at budget `K` is detected with 80% power (null: not within 16×)."""

    K: int
    tasks: int | None
    trials: int | None
    note: str
    """In words (`flatscore.report.gate_text`); empty until the gate's result is worded."""
    reference_trials: int = Field(1, exclude=True)
    """The trials per task the reference ran (what `tasks` is counted at)."""
    paired: int = Field(0, exclude=True)
    """The paired tasks the cell has (what `trials` is counted at)."""
    error: str | None = Field(None, exclude=True)
    """Why the power analysis does not apply, where it does not."""


class GateCell(AnalysisModel):
    model: str
    domain: str
    reference: str
    candidate: str
    paired_tasks: int
    budgets: list[BudgetCheck]
    amplified_channels: list[str]
    new_channels: dict[str, int] = Field(default_factory=dict)
    """Channels the reference never failed in and the candidate did (failed calls): the
    analysis has no ratio for them, so they keep a cell from passing."""
    channels_tested: bool
    verdict: GateVerdict
    reason: str
    """In words (`flatscore.report.gate_text`); empty until the gate's result is worded."""
    more_data: MoreData | None = None
    analysis_verdict: Verdict | None = None
    """The analysis' verdict on the same comparison ("visible damage", "flat score,
    amplified failures", ...: docs/analysis.md); `verdict_rule.GATE_OF` maps it to the
    gate's."""
    sequential: SequentialComparison | None = Field(None, exclude_if=lambda v: v is None)
    """`gate --sequential`: the comparison's sequential reading (its verdict, after how many
    tasks), as `analyze --sequential` writes it."""
    comparison: Comparison | None = Field(None, exclude=True)
    """The analysis' comparison the cell decided from (what its reason says)."""

    @classmethod
    def for_comparison(cls, cell: Cell, comp: Comparison, reference: str, **rest: Any) -> GateCell:
        """The gate's cell for `comp` (the candidate against `reference` in `cell`); `rest`:
        the decision's fields."""
        return cls(
            model=cell.model,
            domain=cell.domain,
            reference=reference,
            candidate=comp.arm,
            paired_tasks=comp.paired_tasks,
            **rest,
        )


Scope = Literal["study", "own"]


class Family(AnalysisModel):
    """The comparisons the gate corrected over (the paired tests' and channels' correction,
    the sequential design's spending): `study`, every arm of the study its inputs hold
    against the reference (the family of `report` on the same runs); `own`, its own
    comparison alone (two separate runs)."""

    scope: Scope
    comparisons: int
    """Comparisons in the family: arms against the reference, over every cell."""
    arms: list[str]
    """The arms compared with the reference."""

    @classmethod
    def of(cls, analysis: AnalysisResult, scope: Scope) -> Family:
        comps = [c for cell in analysis.cells for c in cell.comparisons]
        return cls(scope=scope, comparisons=len(comps), arms=sorted({c.arm for c in comps}))


class GateResult(AnalysisModel):
    verdict: GateVerdict
    exit_code: int
    summary: str
    """One paragraph in words (`flatscore.report.gate_text`); empty until it is worded."""
    cells: list[GateCell]
    options: GateOptions
    family: Family
    warnings: list[str] = Field(default_factory=list)
    notices: list[Notice] = Field(default_factory=list, exclude=True)
    """The analysis' own warnings and then its cells', as data; `report.gate_text.worded_gate`
    words them into `warnings` at `notices_at` (after the analysis' other warnings, before the
    cells')."""
    notices_at: int = Field(0, exclude=True)
    sequential: bool = Field(False, exclude=True)
    """Decided by the sequential verdicts (`gate --sequential`)."""

    @classmethod
    def of(
        cls,
        cells: list[GateCell],
        options: GateOptions,
        analysis: AnalysisResult,
        scope: Scope,
        sequential: bool = False,
    ) -> GateResult:
        """The verdict of the worst cell and the analysis' warnings."""
        overall = min((c.verdict for c in cells), key=SEVERITY.index)
        return cls(
            verdict=overall,
            exit_code=EXIT_CODES[overall],
            summary="",
            cells=cells,
            options=options,
            family=Family.of(analysis, scope),
            sequential=sequential,
            warnings=list(  # each once: a cell's warning may repeat the analysis'
                dict.fromkeys(
                    [*analysis.warnings, *(w for c in analysis.cells for w in c.warnings)]
                )
            ),
            notices=[*analysis.notices, *(n for c in analysis.cells for n in c.notices)],
            notices_at=len(dict.fromkeys(analysis.warnings)),
        )


Labelled = tuple[str | None, Episode]
"""An episode and the file it was read from (None: unknown), as `analysis.identity` takes
them (its duplicate messages name the file)."""


def _one_arm(episodes: Sequence[Labelled], arm: str | None, role: str) -> str:
    arms = sorted({ep.arm for _, ep in episodes})
    if arm is not None:
        if arm not in arms:
            raise InputError(f"no arm {arm!r} in the {role} input (arms: {arms})", field=role)
        return arm
    if len(arms) != 1:
        raise InputError(
            f"the {role} input holds {len(arms)} arms ({arms}); name one with --{role}",
            field=role,
        )
    return arms[0]


class Prepared(NamedTuple):
    """The episodes the gate analyses (each with its file), the two arms' names in them,
    and the family."""

    episodes: list[Labelled]
    reference: str
    candidate: str
    scope: Scope


def check_channels(o: GateOptions) -> None:
    """InputError for a `--channels` name that is no channel."""
    unknown = sorted(set(o.channels or []) - set(CHANNELS))
    if unknown:
        raise InputError(
            f"unknown channel(s) {unknown}; known: {list(CHANNELS)}", field="--channels"
        )


def prepare(
    reference: Sequence[Labelled],
    candidate: Sequence[Labelled],
    reference_arm: str | None = None,
    candidate_arm: str | None = None,
) -> Prepared:
    """The two runs as one study: the whole study when they are one study's runs with other
    arms (`study_runs`); else one arm each, one model name (the reference's), the candidate
    renamed when both arms have the same name."""
    ref_arm = _one_arm(reference, reference_arm, "reference")
    cand_arm = _one_arm(candidate, candidate_arm, "candidate")
    study = study_runs(reference, candidate, ref_arm, cand_arm)
    if study is not None:
        return Prepared(study, ref_arm, cand_arm, "study")
    refs = [(f, ep) for f, ep in reference if ep.arm == ref_arm]
    cands = [(f, ep) for f, ep in candidate if ep.arm == cand_arm]
    same_ids = {ep.episode_id for _, ep in refs} == {ep.episode_id for _, ep in cands}
    if (
        refs
        and same_ids
        and {e.model_dump_json() for _, e in refs} == {e.model_dump_json() for _, e in cands}
    ):
        raise InputError(
            "the reference and the candidate are the same episodes: give the candidate's runs "
            "as the second input",
            field="candidate",
        )
    models = sorted({ep.model for _, ep in refs})
    if len(models) != 1:
        raise InputError(
            f"the reference input holds {len(models)} models ({models}): gate one at a time",
            field="reference",
        )
    label = cand_arm if cand_arm != ref_arm else f"{cand_arm} (candidate)"
    renamed = [
        (
            f,
            ep.model_copy(
                update={"model": models[0], "arm": label, "episode_id": f"c:{ep.episode_id}"}
            ),
        )
        for f, ep in cands
    ]
    return Prepared(refs + renamed, ref_arm, label, "own")


def study_runs(
    reference: Sequence[Labelled], candidate: Sequence[Labelled], ref_arm: str, cand_arm: str
) -> list[Labelled] | None:
    """Every episode of the study both arms ran in that the two inputs hold (each once),
    when they hold another of its arms too: the study `report` reads on these runs. None
    where the arms are of different studies or models, the inputs hold different copies of
    an episode (two runs of one study, not one), or the study has no other arm."""
    if ref_arm == cand_arm:
        return None
    refs = [ep for _, ep in reference if ep.arm == ref_arm]
    cands = [ep for _, ep in candidate if ep.arm == cand_arm]
    names = {ep.study for ep in (*refs, *cands)}
    if len(names) != 1 or not {ep.model for ep in cands} <= {ep.model for ep in refs}:
        return None
    both = _each_once(reference, candidate)
    if both is None:
        return None
    study = [(f, ep) for f, ep in both if ep.study in names]
    return study if {ep.arm for _, ep in study} - {ref_arm, cand_arm} else None


def _each_once(first: Sequence[Labelled], second: Sequence[Labelled]) -> list[Labelled] | None:
    """`first`, then the episodes of `second` it does not hold (the same folder given
    twice, a reference file that is also in the candidate's folder); None when an episode
    id has other contents in each."""
    held: defaultdict[str, list[Episode]] = defaultdict(list)
    for _, ep in first:
        held[ep.episode_id].append(ep)
    out = list(first)
    for f, ep in second:
        same = held.get(ep.episode_id)
        if not same:
            out.append((f, ep))
        elif not any(e is ep or e == ep for e in same):
            return None
    return out


def with_budget(episodes: list[Labelled], k: int) -> list[Labelled]:
    """The episodes as if recorded with max_errors = k + 1 (the analysis' default K is then
    k). Only for k below the recorded budget: S(k) stays recomputable from the logs."""
    out = []
    for f, ep in episodes:
        recorded = ep.error_budget.max_errors
        if recorded is not None and k + 1 > recorded:
            raise InputError(
                f"budget K = {k} is not recomputable: episodes stopped at max_errors = "
                f"{recorded} (use K ≤ {recorded - 1})",
                field="--default-budget",
            )
        budget = ErrorBudget(max_errors=k + 1, counted=ep.error_budget.counted)
        out.append((f, ep.model_copy(update={"error_budget": budget})))
    return out


def _more_data(ref: ArmStats, paired: int, k: int, o: GateOptions) -> MoreData:
    """Smallest study that detects a drop of the margin's size at K with 80% power."""
    success = ref.success_rate
    rates = {ch: s.rate for ch, s in ref.channels.items() if s.rate}
    calls = max(1, round(ref.trajectory.agent_tool_calls.mean or 1))
    trials = max(1, ref.trials_min)

    def detects(tasks: int, n_trials: int) -> bool:
        r = power_analysis(
            success or 0.0, rates, tasks=tasks, trials=n_trials, k=k, calls=calls,
            simulations=o.simulations, seed=o.seed, target_power=TARGET_POWER,
        )  # fmt: skip
        return r.detectable_gap is not None and r.detectable_gap <= o.tost_margin

    try:
        sizes = (round(f * paired) for f in SIZE_FACTORS)
        tasks = next((n for n in sizes if detects(n, trials)), None)
        more_trials = next((t for t in TRIAL_COUNTS if t > trials and detects(paired, t)), None)
    except ValueError as exc:
        return MoreData(K=k, tasks=None, trials=None, note="", paired=paired, error=str(exc))
    return MoreData(
        K=k, tasks=tasks, trials=more_trials, note="", reference_trials=trials, paired=paired
    )


def gate(base: AnalysisResult, prepared: Prepared, o: GateOptions) -> GateResult:
    """The gate's verdict on the candidate replacing the reference (see the module
    docstring), from the analysis of `prepared`'s episodes (`formats.pipeline.gate_labelled`)."""
    _, ref_arm, cand_arm, scope = prepared
    k_default = base.settings.default_K
    if o.tight_budget >= k_default:
        raise InputError(
            f"the tight budget K = {o.tight_budget} must be below the default K = {k_default}",
            field="--tight-budget",
        )
    minimum = base.settings.bootstrap_min_tasks
    cells: list[GateCell] = []
    for cell in candidate_cells(base, cand_arm, scope):
        comp = candidate_comparison(cell, cand_arm, ref_arm)
        e = evidence(comp, base.settings, o.channels)
        decision = decide(e)
        verdict = decision.gate
        checks = list(e.budgets)
        amplified = [ch for ch in comp.amplified_channels if o.channels is None or ch in o.channels]
        new = e.new_channels
        tested = comp.paired_tasks >= minimum
        more = None
        if verdict == "inconclusive":
            ref_stats = next(a for a in cell.arms if a.arm == ref_arm)
            undecided = [c.K for c in checks if not c.drop_ruled_out]
            more = _more_data(ref_stats, comp.paired_tasks, min(undecided or [o.tight_budget]), o)
        cells.append(
            GateCell.for_comparison(
                cell,
                comp,
                ref_arm,
                budgets=checks,
                amplified_channels=amplified,
                new_channels=new,
                channels_tested=tested,
                verdict=verdict,
                analysis_verdict=comp.verdict,  # its own: --channels restricts only the gate
                reason="",  # in words: `report.gate_text`
                more_data=more,
                comparison=comp,
            )
        )
    return GateResult.of(cells, o, base, scope)


def candidate_cells(result: AnalysisResult, candidate: str, scope: Scope) -> list[Cell]:
    """The cells the gate decides: of two runs every cell (one the candidate did not run in
    is an error, `candidate_comparison`); of a study those the candidate ran in (its other
    models and domains are the study's, not the candidate's)."""
    ran = [c for c in result.cells if any(a.arm == candidate for a in c.arms)]
    return ran if scope == "study" and ran else result.cells


class NoComparison(InputError):
    """A cell with no paired comparison of the candidate with the reference. Its message
    gives the cell's warnings, as codes where the cell holds them as data (`Cell.notices`);
    `flatscore gate` says them in words (`report.gate_text.no_comparison`)."""

    def __init__(self, message: str, *, cell: Cell, candidate: str, reference: str) -> None:
        self.cell, self.candidate, self.reference = cell, candidate, reference
        super().__init__(message, field="candidate")


def candidate_comparison(cell: Cell, candidate: str, reference: str) -> Comparison:
    """The cell's comparison of the candidate with the reference; none is an InputError
    (`NoComparison`)."""
    comp = next((c for c in cell.comparisons if c.arm == candidate), None)
    if comp is None:
        why = [*cell.warnings, *(n.kind for n in cell.notices)]
        raise NoComparison(
            f"{cell.model} / {cell.domain}: no paired comparison of {candidate!r} with "
            f"{reference!r} ({'; '.join(why) or 'no common task'})",
            cell=cell,
            candidate=candidate,
            reference=reference,
        )
    return comp
