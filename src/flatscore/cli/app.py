"""The typer app every command module registers on. Commands stay thin: parse, call, print."""

from __future__ import annotations

import sys

import typer
import typer.rich_utils

from flatscore.cli.lazy import LazyGroup
from flatscore.console import make_console, pipe_width, quiet_third_party

quiet_third_party()  # before any command imports transformers
# typer renders --help on a console of its own, 80 columns wide when piped: a log or
# `flatscore run --help | less` then broke every option's help mid-sentence. typer's own
# TERMINAL_WIDTH (already read into MAX_WIDTH) wins.
typer.rich_utils.MAX_WIDTH = typer.rich_utils.MAX_WIDTH or pipe_width(sys.stdout)

app = typer.Typer(
    name="flatscore",
    help="What quantization does to a tool-calling agent beyond the final score.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    cls=LazyGroup,  # command modules are imported on use (flatscore.cli.lazy)
)
LazyGroup.app = app

console = make_console()
err_console = make_console(stderr=True)

__all__ = ["app", "console", "err_console"]


@app.command()
def version() -> None:
    """Print flatscore's version."""
    from flatscore import __version__

    console.print(__version__)


def _print_version(value: bool) -> None:
    if value:
        from flatscore import __version__

        console.print(__version__)
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print flatscore's version and exit.",
    ),
) -> None:
    """flatscore: per-channel error rates, amplification, S(K) and honest statistics for
    tool-calling agents across precision arms."""
