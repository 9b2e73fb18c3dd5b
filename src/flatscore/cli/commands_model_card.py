"""`flatscore export model-card RUNS --out DIR`: the analysis as Hugging Face model cards
(`flatscore.report.model_card`). Thin: parse, analyse, write, print one line per card."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from flatscore import defaults
from flatscore.cli import options as opt
from flatscore.cli.app import console
from flatscore.cli.commands_import import export_app


@export_app.command("model-card")
@opt.settings_flags("tight_budget")
def export_model_card_command(
    runs: opt.Runs,
    out: Annotated[Path, typer.Option(help="Directory for <model>__<arm>/README.md cards.")],
    settings_from: Annotated[
        Path | None,
        typer.Option(
            help="Reuse the analysis settings of this analysis.json (other analysis flags "
            "then ignored)."
        ),
    ] = None,
    reference: opt.Reference = None,
    tight_budget: Annotated[
        int, typer.Option(help="The tight error budget K reported besides the default.")
    ] = defaults.TIGHT_K,
    budgets: opt.Budgets = None,
    flags: dict[str, Any] | None = None,
    channel_rules: opt.ChannelRules = None,
    dedupe: opt.Dedupe = False,
    balanced: opt.Balanced = False,
    sequential: opt.Sequential = False,
    fixed_design: opt.FixedDesign = False,
    trials: opt.Trials = None,
    name: Annotated[
        str, typer.Option(help="The model-index name of each card ({model}, {arm}).")
    ] = "{model}-{arm}",
) -> None:
    """Write a Hugging Face model card per arm: model-index results per domain (S(K) at the
    default and tight budgets with intervals, failed-call ratio, verdict) and a table."""
    from flatscore.formats.pipeline import analyze_runs
    from flatscore.report.model_card import RESULTS_FILE, write_model_cards
    from flatscore.report.rebuild import options_from_settings, settings_from_file
    from flatscore.report.warning_text import warnings

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
    if balanced:
        options = options.model_copy(update={"balanced": True})
    if sequential:
        options = options.model_copy(update={"sequential": True})
    if fixed_design:
        options = options.model_copy(update={"fixed_design": True, "sequential": False})
    if trials is not None:
        picked = opt.analysis_settings(trials=trials).trials
        options = options.model_copy(update={"trials": picked})
    with console.status("reading episodes and analysing…"):
        analysed = analyze_runs(runs, options)
    result = analysed.result
    for line in warnings(analysed.dropped):
        console.print(f"warning: {line}", style="yellow", highlight=False)
    tight = tight_budget
    if tight_budget == defaults.TIGHT_K:  # not given: the reading's, below its default K
        tight = min(result.settings.tight_budget, max(result.settings.default_K - 1, 0))
    for card in write_model_cards(result, out, tight_k=tight, name_template=name):
        verdicts = ", ".join(f"{d}: {v}" for d, v in card.verdicts.items())
        console.print(f"{card.model} / {card.arm} ({verdicts}) → {card.path}", highlight=False)
    console.print(f"every arm's table → {out / RESULTS_FILE}", highlight=False)
