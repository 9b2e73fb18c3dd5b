"""Command modules load lazily: `flatscore --help` and `flatscore version` import no command
module and nothing heavy, while the lazy table stays honest (every command listed, with the
first paragraph of its own docstring)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import typer

from cli_runner import flatscore_process as flatscore
from flatscore.cli import app
from flatscore.cli.lazy import COMMANDS, LazyGroup

HEAVY = ("numpy", "torch", "transformers", "pandas", "pyarrow", "scipy", "httpx")


def _imported(*args: str) -> set[str]:
    """Modules a fresh `flatscore ARGS` imports (from `-X importtime`)."""
    code = "import sys; from flatscore.cli import main; sys.argv[0] = 'flatscore'; main()"
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


@pytest.mark.parametrize("args", [("--help",), ("version",), ("--version",)])
def test_help_and_version_import_no_command_module(args: tuple[str, ...]) -> None:
    modules = _imported(*args)
    assert not {m for m in modules if m.startswith("flatscore.cli.commands_")}
    assert not {m for m in modules if m.split(".")[0] in HEAVY}


def test_version_flag_prints_the_installed_version() -> None:
    from importlib.metadata import version

    done = flatscore("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == version("flatscore")


def test_help_lists_every_command() -> None:
    done = flatscore("--help")
    assert done.returncode == 0, done.stderr
    for name, lazy in COMMANDS.items():
        assert name in done.stdout and lazy.summary.split(",")[0] in done.stdout


def _loaded() -> tuple[LazyGroup, typer.Context]:
    group = typer.main.get_command(app)
    assert isinstance(group, LazyGroup)
    return group, typer.Context(group)


def test_summaries_are_the_commands_own_docstrings() -> None:
    group, ctx = _loaded()
    for name, lazy in COMMANDS.items():
        command = group.get_command(ctx, name)
        assert command is not None, name
        first = " ".join((command.help or "").split("\n\n")[0].split())
        assert first == lazy.summary, name


def test_every_registered_command_is_in_the_table() -> None:
    """A command module that registers a command the table lacks would hide it from --help."""
    group, ctx = _loaded()
    for name in COMMANDS:
        group.get_command(ctx, name)  # loads every module
    assert set(group.commands) <= set(COMMANDS) | {"version"}


def test_a_lazy_command_runs_and_misspellings_are_suggested() -> None:
    done = flatscore("analyze", "--help")
    assert done.returncode == 0 and "--tost-margin" in done.stdout
    wrong = flatscore("analyse")
    assert wrong.returncode == 2 and "Did you mean 'analyze'?" in wrong.stderr


def test_every_command_module_is_in_the_table() -> None:
    """A module the table never names would never be imported: its commands (a group's
    subcommands too, like `import inspect`) would silently vanish."""
    import flatscore.cli

    package = Path(flatscore.cli.__file__).parent
    files = {p.stem for p in package.glob("commands_*.py")}
    named = {
        m
        for lazy in COMMANDS.values()
        for m in ((lazy.module,) if isinstance(lazy.module, str) else lazy.module)
    }
    assert files == named
