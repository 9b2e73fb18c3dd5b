"""From files to an analysis, one way for every command: read the runs, drop or refuse
duplicate episodes, refuse inputs that cannot be compared, analyse.

`flatscore analyze`, `report`, `export model-card`, `run` (its report) and `demo` call
`analyze_runs` (the demo, whose episodes come from an archive, `analyze_labelled`);
`flatscore gate` reads each side with `read_runs`. Nothing here prints or formats text.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from flatscore.analysis.analyze import analyze
from flatscore.analysis.balanced import balanced
from flatscore.analysis.comparable import check_comparable
from flatscore.analysis.identity import unique_episodes
from flatscore.analysis.margins_result import load_margins
from flatscore.analysis.notices import Notice
from flatscore.analysis.recorded import reading_of
from flatscore.analysis.result import AnalysisResult
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


def labelled_runs(paths: Sequence[Path]) -> Iterator[tuple[str, Episode]]:
    """Every episode of the inputs (run folders expanded) with the file it was read from,
    which duplicate messages name."""
    for path in expand_inputs(paths):
        for ep in load_runs([path]):
            yield str(path), ep


def read_runs(paths: Sequence[Path]) -> list[Episode]:
    """Every episode of the inputs, as read (no check: `flatscore gate` reads each side so)."""
    return [ep for _, ep in labelled_runs(paths)]


def analyze_labelled(
    labelled: Iterable[tuple[str | None, Episode]],
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
