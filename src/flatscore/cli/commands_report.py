"""`flatscore report`: rebuild report.html, summary.md and analysis.json from logs alone."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flatscore import defaults
from flatscore.cli import options as opt
from flatscore.cli.app import app, console


@app.command()
def report(
    runs: Annotated[
        list[Path],
        typer.Argument(help="Run folders (their *.jsonl), JSONL runs, or τ² results files/dirs."),
    ],
    out: Annotated[
        Path, typer.Option("--out", help="Folder for report.html, summary.md, analysis.json.")
    ],
    settings_from: Annotated[
        Path | None,
        typer.Option(
            help="Reuse the analysis settings of this analysis.json (other flags then ignored)."
        ),
    ] = None,
    reference: opt.Reference = None,
    budgets: Annotated[
        str | None, typer.Option(help="Error budgets K, e.g. 0-10 or 0,2,9.")
    ] = None,
    count: opt.Count = defaults.COUNT,
    tost_margin: opt.TostMargin = defaults.TOST_MARGIN * 100,
    tight_budget: opt.TightBudget = defaults.TIGHT_K,
    bootstrap: opt.Bootstrap = defaults.BOOTSTRAP,
    seed: opt.BootstrapSeed = defaults.ANALYSIS_SEED,
    correction: opt.Correction = defaults.CORRECTION,
    channel_rules: Annotated[Path | None, typer.Option(help="YAML error-text rules.")] = None,
    dedupe: opt.Dedupe = False,
    balanced: opt.Balanced = False,
    sequential: opt.Sequential = False,
    trials: opt.Trials = None,
    title: Annotated[
        str | None,
        typer.Option(help="Report title (default: the study's name, from the episodes)."),
    ] = None,
    generated_at: Annotated[
        str | None,
        typer.Option(help="A timestamp to print in the report (none by default: byte-stable)."),
    ] = None,
    margins: Annotated[
        Path | None,
        typer.Option(help="Add a 'flatscore margins' result (margins.json) to the report."),
    ] = None,
) -> None:
    """Rebuild the report (report.html, summary.md, analysis.json, tables.md) from episode
    logs: the same logs and settings give the same bytes."""
    from flatscore.cli.commands_analyze import options_from_flags
    from flatscore.report.rebuild import options_from_settings, rebuild, settings_from_file
    from flatscore.run.driver import print_verdicts

    if settings_from is not None:
        options = options_from_settings(settings_from_file(settings_from))
    else:
        flags = (reference, budgets, count, tost_margin, bootstrap, seed, correction)
        options = options_from_flags(*flags, channel_rules, dedupe, tight_budget=tight_budget)
    if balanced:  # also over --settings-from (whose analysis records it when it was on)
        options = options.model_copy(update={"balanced": True})
    if sequential:
        options = options.model_copy(update={"sequential": True})
    if trials is not None:  # likewise
        from flatscore.analysis.settings import AnalysisSettings

        picked = AnalysisSettings.from_flags(trials=trials).trials
        options = options.model_copy(update={"trials": picked})
    with console.status("reading episodes, analysing, drawing the report…"):
        result, paths = rebuild(
            runs,
            out,
            options,
            title=title,
            generated_at=generated_at,
            margins=margins,
        )
    print_verdicts(result, paths, console, sentences=False)
