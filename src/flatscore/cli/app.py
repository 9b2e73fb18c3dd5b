"""The typer app every command module registers on. Commands stay thin: parse, call, print."""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer
import typer.rich_utils
from typer.core import TyperArgument, TyperOption

from flatscore.cli.lazy import LazyGroup
from flatscore.console import make_console, pipe_width, quiet_third_party, styled

quiet_third_party()  # before any command imports transformers
# typer renders --help on a console of its own, 80 columns wide when piped: a log or
# `flatscore run --help | less` then broke every option's help mid-sentence. typer's own
# TERMINAL_WIDTH (already read into MAX_WIDTH) wins.
typer.rich_utils.MAX_WIDTH = typer.rich_utils.MAX_WIDTH or pipe_width(sys.stdout)


def _value_label(self: TyperOption | TyperArgument, ctx: Any) -> str | None:
    """The help's value column: nothing for a flag (typer printed `<bool>` beside every
    switch, --help included), PATH / INT / TEXT for a value."""
    if isinstance(self, TyperOption) and (self.is_flag or self.count):
        return None
    if self.metavar is not None:
        return self.metavar
    label = type(self).display_type(self, ctx).strip("<>")
    for inner in ("list[", "tuple["):
        if label.startswith(inner):
            label = label[len(inner) : -1]
    label = {"str": "TEXT", "Path": "PATH"}.get(label, label.upper())
    return label + "..." if self.nargs != 1 else label


def _usage_name(self: TyperArgument) -> str:
    """An argument in the usage line as its help names it, upper case: `RUNS...`, `[STUDY]`
    when optional (typer wrote `{runs}...` and `[[STUDY]]`)."""
    name = (self.metavar or self.name or "").strip("[]{}").upper()
    name = name if self.required else f"[{name}]"
    return name + "..." if self.nargs != 1 else name


TyperOption.display_type_rich = _value_label  # type: ignore[method-assign]
TyperArgument.display_type_rich = _value_label  # type: ignore[method-assign, assignment]
TyperArgument._usage_display_name = _usage_name  # type: ignore[method-assign]

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


def _one_line_error(self: Any) -> None:
    """A usage error (a missing argument, a value out of range) as every bad input is said:
    one line on stderr, exit 2 (typer drew a usage line, a hint and a boxed panel)."""
    if self.__class__.__name__ == "NoArgsIsHelpError":
        return
    ctx = getattr(self, "ctx", None)
    where = f" (see {ctx.command_path} --help)" if ctx is not None else ""
    message = " ".join(self.format_message().split())
    err_console.print(styled(("error:", "bold red"), " ", message + where))


typer.rich_utils.rich_format_error = _one_line_error

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
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print flatscore's version and exit.",
        ),
    ] = False,
) -> None:
    """flatscore: per-channel error rates, amplification, S(K) and honest statistics for
    tool-calling agents across precision arms."""
