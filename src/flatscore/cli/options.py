"""Flags that `flatscore analyze` and `flatscore report` share (the analysis settings), written
once so that both commands say and default the same."""

from __future__ import annotations

from typing import Annotated

import typer

TostMargin = Annotated[float, typer.Option(help="TOST equivalence margin, in points.")]
Bootstrap = Annotated[int, typer.Option(help="Bootstrap resamples.")]
BootstrapSeed = Annotated[int, typer.Option(help="Bootstrap seed.")]
Correction = Annotated[str, typer.Option(help="Multiple-testing correction: holm or bh.")]
Dedupe = Annotated[bool, typer.Option(help="Keep one copy of duplicate episodes (with a warning).")]
Balanced = Annotated[
    bool,
    typer.Option(help="Only the (domain, task, trial) every arm of a cell has (a study cut short)"),
]
