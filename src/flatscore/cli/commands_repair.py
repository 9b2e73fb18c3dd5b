"""`flatscore repair-effect`: the effect of reflective repair per cell and arm, with CIs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flatscore import defaults
from flatscore.cli import options as opt
from flatscore.cli.app import app, console
from flatscore.console import styled
from flatscore.errors import InputError


@app.command("repair-effect")
def repair_effect(
    runs: Annotated[
        list[Path], typer.Argument(help="Runs (files or run folders) with and without --repair.")
    ],
    reference: opt.Reference = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the result here.")] = None,
    count: opt.Count = defaults.COUNT,
    bootstrap: opt.Bootstrap = defaults.BOOTSTRAP,
    seed: opt.BootstrapSeed = defaults.ANALYSIS_SEED,
    budgets: opt.Budgets = None,
    balanced: Annotated[
        bool,
        typer.Option(
            help="Paired: only the (domain, task, trial) every repaired arm and its plain twin "
            "have (a repair pass on part of a study; other plain arms are left out)."
        ),
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Folder for repair-effect.json, repair-effect.md (the table and warnings) and "
            "tables.md (the effect and the repaired channels' rates, as study tables).",
        ),
    ] = None,
) -> None:
    """Repair effect S_with(K) − S_without(K) per arm, and its interaction with precision."""
    from flatscore.analysis.outputs import rounded_json
    from flatscore.analysis.repair_effect import repair_effects
    from flatscore.formats import load_runs
    from flatscore.formats.pipeline import expand_inputs
    from flatscore.report.effect_tables import repair_table
    from flatscore.report.warning_text import worded_repair

    options = opt.analysis_settings(
        reference=reference, count=count, bootstrap=bootstrap, seed=seed, budgets=budgets
    )
    for path in runs:
        if not path.exists():
            raise InputError("run not found", file=str(path))
    episodes = list(load_runs(expand_inputs(runs)))  # a run folder: its *.jsonl
    if balanced:
        from flatscore.analysis.balanced import repair_pairs

        episodes = repair_pairs(episodes)
    result = worded_repair(repair_effects(episodes, options))
    if not result.cells:
        raise InputError("no arm was run both with and without repair")
    table = repair_table(result)
    warnings = result.warnings + [w for c in result.cells for w in c.warnings]
    console.print(table, highlight=False, markup=False, soft_wrap=True)
    for w in warnings:
        console.print(styled(("warning:", "yellow"), f" {w}"))
    if balanced:
        console.print(f"{len(episodes)} episodes paired (--balanced)", style="dim")
    text = rounded_json(result) + "\n"
    if json_out is not None:
        json_out.write_text(text, encoding="utf-8")
        console.print(f"wrote {json_out}", style="dim")
    if out is not None:
        from flatscore.report.tables import repair_tables

        out.mkdir(parents=True, exist_ok=True)
        for name, body in (
            ("repair-effect.json", text),
            ("repair-effect.md", table + "".join(f"\n- warning: {w}" for w in warnings) + "\n"),
            ("tables.md", "\n".join(repair_tables(result)) + "\n"),
        ):
            (out / name).write_text(body, encoding="utf-8", newline="\n")
        console.print(f"wrote {out}/repair-effect.json, repair-effect.md, tables.md", style="dim")
