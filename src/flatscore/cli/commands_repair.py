"""`flatscore repair-effect`: the effect of reflective repair per cell and arm, with CIs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flatscore import defaults
from flatscore.cli.app import app, console
from flatscore.cli.options import Bootstrap, BootstrapSeed
from flatscore.console import styled
from flatscore.errors import InputError


@app.command("repair-effect")
def repair_effect(
    runs: Annotated[list[Path], typer.Argument(help="Runs with and without --repair.")],
    reference: Annotated[
        str | None, typer.Option(help="Reference arm (default: highest precision).")
    ] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the result here.")] = None,
    count: Annotated[
        str, typer.Option(help="Errors counted for S(K): all or agent.")
    ] = defaults.COUNT,
    bootstrap: Bootstrap = defaults.BOOTSTRAP,
    seed: BootstrapSeed = defaults.ANALYSIS_SEED,
) -> None:
    """Repair effect S_with(K) − S_without(K) per arm, and its interaction with precision."""
    from flatscore.analysis.repair_effect import markdown_table, repair_effects
    from flatscore.analysis.settings import AnalysisSettings
    from flatscore.formats import load_runs

    options = AnalysisSettings.from_flags(
        reference=reference, count=count, bootstrap=bootstrap, seed=seed
    )
    for path in runs:
        if not path.exists():
            raise InputError("run not found", file=str(path))
    result = repair_effects(load_runs(runs), options)
    if not result.cells:
        raise InputError("no arm was run both with and without repair")
    console.print(markdown_table(result), highlight=False, markup=False, soft_wrap=True)
    for w in result.warnings + [w for c in result.cells for w in c.warnings]:
        console.print(styled(("warning:", "yellow"), f" {w}"))
    if json_out is not None:
        json_out.write_text(result.model_dump_json(indent=2) + "\n", encoding="utf-8")
        console.print(f"wrote {json_out}", style="dim")
