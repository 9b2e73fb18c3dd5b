"""Every command's --help: a description on every option, no type labels such as `<bool>`, and
one name per shared option (the old spellings only as aliases the help calls deprecated)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import typer.main
from typer._click import core

from cli_runner import CliResult
from flatscore.cli.app import app
from flatscore.cli.legacy import NOTE, RENAMED

SHARED = {
    "tost margin": "--tost-margin",
    "errors counted": "--count",
    "tight budget": "--tight-budget",
    "json output": "--json",
}
"""Concept → the one name every command that has it uses first."""


def _concept(option: Any) -> str | None:
    names = set(option.opts) | set(option.secondary_opts)
    name = option.name or ""
    if name in ("tost_margin", "margin"):
        return "tost margin"
    if name in ("count", "counted"):
        return "errors counted"
    if "--tight-budget" in names or name in ("k", "tight_budget"):
        return "tight budget"
    if "--json" in names:
        return "json output"
    return None


def commands() -> Iterator[tuple[list[str], Any]]:
    root = typer.main.get_command(app)
    ctx = core.Context(root)

    def walk(cmd: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
        yield path, cmd
        if hasattr(cmd, "list_commands"):
            for name in cmd.list_commands(ctx):
                yield from walk(cmd.get_command(ctx, name), [*path, name])

    yield from walk(root, [])


ALL = list(commands())


def test_every_command_is_checked() -> None:
    names = {" ".join(p) for p, _ in ALL}
    assert {"analyze", "report", "gate", "power", "run", "archive pack", "export parquet"} <= names


@pytest.mark.parametrize("path", [p for p, _ in ALL], ids=lambda p: " ".join(p) or "flatscore")
def test_help_reads_cleanly(path: list[str], flatscore: Callable[..., CliResult]) -> None:
    cmd = dict((tuple(p), c) for p, c in ALL)[tuple(path)]
    r = flatscore(*path, "--help")
    assert r.returncode == 0, r.stderr
    assert "<bool>" not in r.stdout and "<" + "str>" not in r.stdout, r.stdout
    for param in cmd.params:
        if param.param_type_name != "option":
            continue
        assert param.help and param.help.strip(), f"{' '.join(path)} {param.opts}: no description"
        concept = _concept(param)
        if concept is not None:
            assert param.opts[0] == SHARED[concept], (path, param.opts)
        old = [o for o in [*param.opts[1:]] if o in RENAMED.get(path[0] if path else "", {})]
        for spelling in old:
            assert spelling in param.help and NOTE in param.help, (path, param.opts)
    if path == []:
        assert "--version" in r.stdout


def test_shared_options_mean_one_thing() -> None:
    """--json takes a path wherever it exists (never a bare flag)."""
    for path, cmd in ALL:
        for param in cmd.params:
            if "--json" in getattr(param, "opts", []):
                assert not param.is_flag, path


def test_version_flag(flatscore: Callable[..., CliResult]) -> None:
    from flatscore import __version__

    r = flatscore("--version")
    assert r.returncode == 0 and r.stdout.strip() == __version__
