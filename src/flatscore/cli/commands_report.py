"""`flatscore report`: rebuild report.html, summary.md and analysis.json from logs alone."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from flatscore.cli import options as opt
from flatscore.cli.app import app, console


@app.command()
@opt.settings_flags()
def report(
    runs: opt.Runs,
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
    flags: dict[str, Any] | None = None,
    channel_rules: opt.ChannelRules = None,
    dedupe: opt.Dedupe = False,
    balanced: opt.Balanced = False,
    sequential: opt.Sequential = False,
    fixed_design: opt.FixedDesign = False,
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
    from flatscore.report.rebuild import options_from_settings, rebuild, settings_from_file
    from flatscore.report.terminal import print_verdicts

    if settings_from is not None:
        options = options_from_settings(settings_from_file(settings_from))
    else:
        options = opt.analysis_settings(
            reference=reference,
            budgets=budgets,
            channel_rules=channel_rules,
            dedupe=dedupe,
            **(flags or {}),
        )
    if balanced:  # also over --settings-from (whose analysis records it when it was on)
        options = options.model_copy(update={"balanced": True})
    if sequential:
        options = options.model_copy(update={"sequential": True})
    if fixed_design:
        options = options.model_copy(update={"fixed_design": True, "sequential": False})
    if trials is not None:  # likewise
        picked = opt.analysis_settings(trials=trials).trials
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
