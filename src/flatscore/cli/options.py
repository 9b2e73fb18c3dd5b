"""Flags that several commands share (the analysis settings, the reference arm, the error
budgets), written once so that every command says and defaults them the same. Command modules
import this module as `opt` and annotate with `opt.Reference` and so on."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

Reference = Annotated[str | None, typer.Option(help="Reference arm (default: highest precision).")]
Budgets = Annotated[
    str | None, typer.Option(help="Error budgets K, e.g. 0-10 or 0,2,9 (default 0..default K).")
]
Count = Annotated[
    str, typer.Option(help="Errors counted for S(K): all (agent + user, like τ²) or agent.")
]
TostMargin = Annotated[
    float,
    typer.Option(
        "--tost-margin", help="TOST equivalence margin, in points (7.5 = ±7.5 points of success)."
    ),
]
TightBudget = Annotated[
    int,
    typer.Option(
        "--tight-budget",
        min=0,
        help="The tight error budget K the verdict tests besides the default (where a hidden "
        "gap shows).",
    ),
]
JsonOut = Annotated[
    Path | None,
    typer.Option("--json", help="Also write the result as JSON to this path ('-': stdout)."),
]
Bootstrap = Annotated[int, typer.Option(help="Bootstrap resamples.")]
BootstrapSeed = Annotated[int, typer.Option(help="Bootstrap seed.")]
Correction = Annotated[str, typer.Option(help="Multiple-testing correction: holm or bh.")]
Dedupe = Annotated[bool, typer.Option(help="Keep one copy of duplicate episodes (with a warning).")]
Balanced = Annotated[
    bool,
    typer.Option(help="Only the (domain, task, trial) every arm of a cell has (a study cut short)"),
]
Sequential = Annotated[
    bool,
    typer.Option(
        help="Also decide each comparison as a sequential study would have, and after how "
        "many tasks (docs/analysis.md, 'Sequential verdicts')."
    ),
]
Trials = Annotated[
    str | None,
    typer.Option(
        help="Only these trials, counted from 1 (e.g. 1-2): pins an analysis to the trials it "
        "read while a study goes on"
    ),
]
ProgressBar = Annotated[bool, typer.Option(help="Show a progress bar.")]
ProgressBars = Annotated[bool, typer.Option(help="Show progress bars.")]
TorchThreads = Annotated[int, typer.Option(min=1, help="torch threads.")]
