"""Rebuild a report from logs alone: read the episodes, run the analysis, write the report.

Used by `flatscore report`. With the same analysis options the result is byte-identical to
the run's own report (the analysis is seeded; the report has no timestamp unless asked).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from flatscore.analysis.result import AnalysisResult, Settings
from flatscore.analysis.settings import AnalysisSettings
from flatscore.episode import Episode
from flatscore.errors import InputError, validating
from flatscore.formats.pipeline import analyze_runs
from flatscore.report import ReportPaths, write_report


def default_title(episodes: Sequence[Episode]) -> str:
    """The report's title when none is given: the study's name (one study), else generic."""
    studies = sorted({ep.study for ep in episodes})
    return f"flatscore · {studies[0]}" if len(studies) == 1 else "flatscore report"


def options_from_settings(settings: Settings) -> AnalysisSettings:
    """The analysis settings that reproduce a previous analysis.json exactly (its
    `channel_rules` names the rules it was computed with)."""
    chosen = set(AnalysisSettings.model_fields) - {"rules"}
    return AnalysisSettings.model_validate(
        {**settings.model_dump(include=chosen), "channel_rules": settings.channel_rules}
    )


def settings_from_file(path: Path) -> Settings:
    """The `settings` of an existing analysis.json (bad file: InputError naming it)."""
    if not path.exists():
        raise InputError("file not found", file=str(path))
    try:
        settings = json.loads(path.read_text("utf-8"))["settings"]
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON ({exc.msg})", file=str(path)) from None
    except (KeyError, TypeError):
        raise InputError("no 'settings' object: not an analysis.json", file=str(path)) from None
    with validating(file=str(path), prefix="settings."):
        return Settings.model_validate(settings)


def rebuild(
    inputs: Sequence[Path],
    out_dir: Path,
    options: AnalysisSettings,
    *,
    title: str | None = None,
    generated_at: str | None = None,
    margins: Path | None = None,
) -> tuple[AnalysisResult, ReportPaths]:
    """Episodes → analysis (`analyze_runs`) → report.html, summary.md, analysis.json and
    tables.md in `out_dir`; `margins` attaches a `flatscore margins` result (its section and
    plot). `options.balanced` keeps only the (domain, task, trial) every arm of a cell has
    (the analysis applies and records it; the report shows the episodes analysed)."""
    analysed = analyze_runs(inputs, options, margins=margins)
    paths = write_report(
        analysed.result,
        analysed.episodes,
        out_dir,
        rules=options.rules,
        title=title or default_title(analysed.episodes),
        generated_at=generated_at,
    )
    return analysed.result, paths
