"""From files to an analysis, one way for every command: read the runs, drop or refuse
duplicate episodes, refuse inputs that cannot be compared, analyse.

Every command that analyses runs goes through `analyze_labelled`: `flatscore analyze`,
`report`, `export model-card` and `run` (its report) by `analyze_runs`; `flatscore gate` by
`gate_labelled` (its two inputs made one study first, `analysis.gate.prepare`); `demo`
directly (its episodes come from an archive). Nothing here prints or formats text.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from flatscore.analysis.analyze import analyze
from flatscore.analysis.balanced import balanced
from flatscore.analysis.comparable import check_comparable
from flatscore.analysis.gate import (
    GateOptions,
    GateResult,
    Labelled,
    check_channels,
    gate,
    prepare,
    with_budget,
)
from flatscore.analysis.identity import unique_episodes
from flatscore.analysis.margins_result import load_margins
from flatscore.analysis.notices import Notice
from flatscore.analysis.recorded import reading_of
from flatscore.analysis.result import AnalysisResult
from flatscore.analysis.sequential_gate import sequential_gate
from flatscore.analysis.settings import AnalysisSettings
from flatscore.analysis.trials import pick_trials
from flatscore.episode import Episode
from flatscore.errors import InputError
from flatscore.formats import load_runs


@dataclass(frozen=True)
class Analysed:
    """An analysis and the episodes it analysed (after `--trial-range` and `--balanced`: what a
    report shows beside the numbers)."""

    result: AnalysisResult
    episodes: list[Episode]
    dropped: list[Notice]
    """What reading left out (attempts superseded by a rerun, duplicates under `--dedupe`),
    as data (`report.warning_text` words them); also the first of `result.notices`."""


def expand_inputs(paths: Sequence[Path]) -> list[Path]:
    """A run folder stands for the JSONL runs under it; anything else (a `.jsonl` file, a τ²
    results file or folder) is passed on as given."""
    out: list[Path] = []
    for path in paths:
        if not path.exists():
            raise InputError("file not found", file=str(path))
        runs = sorted(path.rglob("*.jsonl")) if path.is_dir() else []
        if path.is_dir() and not runs and not (path / "results.json").exists():
            raise InputError(
                "no runs here: neither flatscore runs (*.jsonl, in any subfolder) nor τ² "
                "results (results.json)",
                file=str(path),
            )
        out.extend(runs or [path])
    return out


def labelled_runs(paths: Sequence[Path]) -> Iterator[Labelled]:
    """Every episode of the inputs (run folders expanded) with the file it was read from,
    which duplicate messages name."""
    for path in expand_inputs(paths):
        for ep in load_runs([path]):
            yield str(path), ep


def analyze_labelled(
    labelled: Iterable[Labelled],
    settings: AnalysisSettings,
    *,
    margins: Path | None = None,
) -> Analysed:
    """`analyze_runs` over episodes already read, each with the file it came from (None:
    unknown, as for an archive's)."""
    attached = load_margins(margins) if margins is not None else None
    episodes, dropped = unique_episodes(labelled, settings.dedupe)
    check_comparable(episodes)
    settings, disagree = reading_of(episodes, settings)
    result = analyze(episodes, settings)
    result.notices[:0] = dropped + disagree
    if attached is not None:
        result.margins = attached
    shown = pick_trials(episodes, settings.trials)
    if settings.balanced:
        shown = balanced(shown)
    return Analysed(result=result, episodes=shown, dropped=dropped)


def analyze_runs(
    paths: Sequence[Path], settings: AnalysisSettings, *, margins: Path | None = None
) -> Analysed:
    """Files → analysis: read every run (folders expanded), refuse duplicates (drop them with
    a warning under `settings.dedupe`), refuse inputs that cannot be compared, fill the
    settings the user did not give from the study the files record and read a sequential
    run sequentially (`analysis.recorded.reading_of`), analyse.
    `margins` attaches a `flatscore margins` result (margins.json)."""
    return analyze_labelled(labelled_runs(paths), settings, margins=margins)


def gate_labelled(
    reference: Sequence[Labelled],
    candidate: Sequence[Labelled],
    options: GateOptions | None = None,
    reference_arm: str | None = None,
    candidate_arm: str | None = None,
    *,
    sequential: bool = False,
    max_tasks: int | None = None,
) -> GateResult:
    """`flatscore gate`: the two inputs' episodes (each with its file) made one study
    (`analysis.gate.prepare`), analysed as every command analyses runs (`analyze_labelled`:
    duplicates refused, inputs that cannot be compared refused), and decided — at the
    planned looks with `sequential` (`max_tasks`: the design's maximum), else as a fixed
    design (`--default-budget` applied first)."""
    o = options or GateOptions()
    check_channels(o)
    prepared = prepare(reference, candidate, reference_arm, candidate_arm)
    if sequential:
        settings = o.analysis(prepared.reference, sequential=True, sequential_max_tasks=max_tasks)
        return sequential_gate(analyze_labelled(prepared.episodes, settings).result, prepared, o)
    k = o.default_budget
    episodes = with_budget(prepared.episodes, k) if k is not None else prepared.episodes
    settings = o.analysis(prepared.reference, fixed_design=True)  # a sequential run too
    return gate(analyze_labelled(episodes, settings).result, prepared, o)
