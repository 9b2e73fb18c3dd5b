"""`flatscore import inspect ...` and `flatscore export inspect ...`: Inspect AI logs in and out
(the `inspect` extra). Thin wrappers: parse, call one function, print its summary."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flatscore.cli.app import console
from flatscore.cli.commands_import import (
    ExportRuns,
    ImportOut,
    export_app,
    import_app,
    print_import_summary,
)


@import_app.command("inspect")
def import_inspect_command(
    logs: Annotated[list[Path], typer.Argument(help="Inspect AI eval logs (.eval or .json).")],
    out: ImportOut,
    arm: Annotated[
        str | None, typer.Option(help="The precision arm (default: the log's model name).")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(
            help="Model name (default: the log's model). Arms of one model must share it."
        ),
    ] = None,
    domain: Annotated[
        str | None, typer.Option(help="Domain (default: the log's task name).")
    ] = None,
    study: Annotated[str | None, typer.Option(help="Study name (default: inspect).")] = None,
    scorer: Annotated[
        str | None, typer.Option(help="The score that is the task's success (default: first).")
    ] = None,
    error_map: Annotated[
        Path | None,
        typer.Option(
            help="YAML mapping of Inspect tool-error types to channels "
            "(default: the bundled inspect_errors.yaml)."
        ),
    ] = None,
) -> None:
    """Import Inspect AI eval logs as canonical episodes."""
    from flatscore.formats.inspect_import import import_inspect
    from flatscore.formats.inspect_log import load_error_map, require_inspect

    require_inspect()
    summary = import_inspect(
        logs,
        out,
        arm=arm,
        model=model,
        study=study,
        domain=domain,
        scorer=scorer,
        error_map=load_error_map(error_map) if error_map is not None else None,
    )
    print_import_summary(summary)


@export_app.command("inspect")
def export_inspect_command(
    runs: ExportRuns,
    out: Annotated[Path, typer.Option(help="Directory for the Inspect .eval logs.")],
) -> None:
    """Write Inspect AI .eval logs (one per model, domain and arm) for `inspect view`."""
    from flatscore.formats import load_runs
    from flatscore.formats.inspect_export import export_inspect
    from flatscore.formats.inspect_log import require_inspect

    require_inspect()
    for log in export_inspect(load_runs(runs), out):
        console.print(
            f"{log.samples} episodes ({log.arm}, {log.domain}) → {log.path}", highlight=False
        )
