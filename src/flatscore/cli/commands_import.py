"""`flatscore import tau2 ...` and `flatscore export parquet ...`: thin wrappers that parse,
call one function and print its summary."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flatscore.cli.app import app, console, err_console
from flatscore.cli.import_text import import_warnings

if TYPE_CHECKING:
    from flatscore.formats.tau2_import import ImportSummary

import_app = typer.Typer(
    help="Import other benchmarks' result files as flatscore runs.", no_args_is_help=True
)
export_app = typer.Typer(
    help="Export runs: flat tables, Inspect logs, model cards.", no_args_is_help=True
)
app.add_typer(import_app, name="import")
app.add_typer(export_app, name="export")

ExportRuns = Annotated[
    list[Path], typer.Argument(help="Runs (.jsonl) or τ² results files to export.")
]
ImportOut = Annotated[Path, typer.Option(help="The run file to append to (JSONL).")]


def print_import_summary(summary: ImportSummary) -> None:
    """What an import wrote (per file, per termination reason), what it left out and why:
    the same for every format."""
    from rich.table import Table
    from rich.text import Text

    for f in summary.files:
        console.print(
            f"{f.path}: {f.episodes} episodes, format {f.format}, domain {f.domain}, "
            f"tool lists from {f.tool_source}",
            highlight=False,
        )
    table = Table("termination reason", "episodes", title=Text(f"written to {summary.out}"))
    for reason, n in summary.by_termination.items():
        table.add_row(Text(reason), str(n))
    table.add_row(Text("total", style="bold"), Text(str(summary.written), style="bold"))
    console.print(table)
    if summary.already_present:
        console.print(
            f"{summary.already_present} episodes were already in {summary.out} (same study, arm, "
            "domain, task and trial) and were not written again",
            highlight=False,
        )
    if summary.malformed_turns:
        console.print(
            f"{summary.malformed_turns} agent turns were marked malformed by the server "
            "(malformed_output channel)",
            highlight=False,
        )
    for line in import_warnings(summary):
        err_console.print(f"warning: {line}", style="yellow", highlight=False, soft_wrap=True)
    if summary.skipped:
        err_console.print(f"skipped {len(summary.skipped)} invalid simulations:", style="yellow")
        for line in summary.skipped:
            err_console.print(f"  {line}")


@import_app.command("tau2")
def import_tau2_command(
    paths: Annotated[
        list[Path],
        typer.Argument(help="τ²-bench results files (v0.1–v1.x) or v1.x result directories."),
    ],
    arm: Annotated[str, typer.Option(help="The precision arm these episodes belong to.")],
    out: ImportOut,
    model: Annotated[
        str | None,
        typer.Option(
            help="Model name (default: the file's agent model). Arms of one model must share it."
        ),
    ] = None,
    study: Annotated[str | None, typer.Option(help="Study name (default: tau2).")] = None,
    skip_invalid: Annotated[
        bool, typer.Option("--skip-invalid", help="Skip bad simulations, report them, and go on.")
    ] = False,
) -> None:
    """Import τ²-bench results as one arm of a flatscore run."""
    from rich.progress import Progress, SpinnerColumn, TextColumn

    from flatscore.formats.tau2_import import import_tau2

    with Progress(
        SpinnerColumn(),
        TextColumn("importing: {task.completed} episodes"),
        console=err_console,
        transient=True,
        disable=not err_console.is_terminal,
    ) as progress:
        task = progress.add_task("import", total=None)
        summary = import_tau2(
            paths,
            out,
            arm=arm,
            model=model,
            study=study,
            skip_invalid=skip_invalid,
            on_episode=lambda _ep: progress.advance(task),
        )

    print_import_summary(summary)


@export_app.command("parquet")
def export_parquet_command(
    runs: ExportRuns,
    out: Annotated[Path, typer.Option(help="Directory for the Parquet tables.")],
) -> None:
    """Write episodes.parquet and tool_calls.parquet (one row per tool call)."""
    from flatscore.formats import load_runs
    from flatscore.formats.parquet import EPISODES_FILE, TOOL_CALLS_FILE, export_parquet

    counts = export_parquet(load_runs(runs), out)
    console.print(
        f"{counts.episodes} episodes → {out / EPISODES_FILE}\n"
        f"{counts.tool_calls} tool calls → {out / TOOL_CALLS_FILE}",
        highlight=False,
    )
