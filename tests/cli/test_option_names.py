"""Every command's `--help`: no option name with two meanings, and usage lines that name
their arguments as the help does (`RUNS...`, not `{runs}...`).

An option name's meaning is its help text, read without its parenthesised remarks (a
default, an example, the deprecated spelling) and case: every command whose option has a
name says it the same way, or the name is in `MEANINGS`, the short glossary of names whose
help words one meaning in each command's terms. Old spellings (`cli.legacy.RENAMED`) are
left out where they stand beside the name they became: `margins --reference` (a precision)
and `analyze --trials` (a range) are the old names of `--reference-logits` and
`--trial-range`, kept for a release."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import typer.main
from typer._click import core

from cli_runner import CliResult
from flatscore.cli.app import app
from flatscore.cli.legacy import RENAMED

MEANINGS: dict[str, tuple[int, str]] = {
    # name: (its wordings in the commands' helps, the one meaning)
    "--adapter": (2, "a LoRA adapter folder merged into the model"),
    "--arm": (6, "the arm the command runs, serves, reads or labels its episodes with"),
    "--arms": (2, "the arms the command runs or compares, comma-separated"),
    "--balanced": (2, "only the episodes every compared arm has (repair-effect: the pairs)"),
    "--compute": (2, "the precision the linear layers compute in"),
    "--concurrency": (4, "episodes in flight at once"),
    "--count": (2, "which errors count, all or the agent's: while running, and for S(K)"),
    "--domain": (3, "the domain (cell) the command runs, reads or labels"),
    "--json": (3, "where the result goes as JSON"),
    "--margins": (2, "a `flatscore margins` result added to the output"),
    "--max-tasks": (2, "the sequential design's maximum tasks"),
    "--model": (4, "the model: the weights loaded, or for imported results its name"),
    "--name": (2, "the name the model is published under (a card, a served model id)"),
    "--out": (12, "where the command writes (a file or a folder, as each help says)"),
    "--progress": (2, "show progress bars"),
    "--reference": (2, "the reference arm (power: its pilot's)"),
    "--repair": (2, "reflective repair (docs/repair.md)"),
    "--resume": (2, "continue from what an earlier run left"),
    "--seed": (3, "the seed of the command's random draws (bootstrap, simulation, episodes)"),
    "--sequential": (2, "the sequential design: decide at planned looks, or size such a study"),
    "--study": (2, "the study's name its episodes carry"),
    "--tasks": (2, "how many tasks (per domain)"),
    "--threads": (3, "CPU threads of the model's computation"),
    "--tight-budget": (3, "the tight error budget K"),
}
"""Names whose help says one meaning in several wordings: the count of wordings (a command
that adds one, or one unified, is a change this glossary must follow) and the meaning."""


def _commands() -> Iterator[tuple[list[str], Any, core.Context]]:
    """Every command and subcommand, each loaded through its group (the root is lazy)."""

    def walk(cmd: Any, path: list[str], ctx: core.Context) -> Iterator[Any]:
        yield path, cmd, ctx
        if hasattr(cmd, "list_commands"):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None, [*path, name]
                yield from walk(sub, [*path, name], core.Context(sub, info_name=name, parent=ctx))

    root = typer.main.get_command(app)
    yield from walk(root, [], core.Context(root, info_name="flatscore"))


ALL = list(_commands())


def _current_names(path: list[str], option: Any) -> list[str]:
    """The option's names less the old spellings renamed to one of its own names."""
    renamed = RENAMED.get(path[0], {}) if path else {}
    names = [*option.opts, *option.secondary_opts]
    return [n for n in names if renamed.get(n) not in option.opts and not n.startswith("--no-")]


def meaning(help_text: str) -> str:
    """The help without parenthesised remarks, a final period, case or spacing."""
    while (shorter := re.sub(r"\s*\([^()]*\)", "", help_text)) != help_text:
        help_text = shorter
    return " ".join(help_text.split()).rstrip(". ").casefold()


def wordings() -> dict[str, dict[str, list[str]]]:
    """Option name → each way its help says it → the commands that say it so."""
    out: dict[str, dict[str, list[str]]] = {}
    for path, cmd, _ in ALL:
        for param in cmd.params:
            if param.param_type_name != "option":
                continue
            for name in _current_names(path, param):
                said = out.setdefault(name, {}).setdefault(meaning(param.help or ""), [])
                said.append(" ".join(path))
    return out


def test_every_command_is_read() -> None:
    names = {" ".join(p) for p, _, _ in ALL}
    assert {"gate", "margins", "embedded-round", "archive status", "export model-card"} <= names
    # each loaded, not the lazy group's listing stand-in (a name and a line, no callback)
    assert all(cmd.callback for p, cmd, _ in ALL if p and not hasattr(cmd, "list_commands"))


def test_every_option_name_has_one_meaning() -> None:
    for name, said in sorted(wordings().items()):
        if len(said) == 1:
            continue
        assert name in MEANINGS, f"{name} means {len(said)} things: {said}"
        count, _ = MEANINGS[name]
        assert len(said) == count, f"{name}: {len(said)} wordings, MEANINGS says {count}: {said}"


def test_the_glossary_names_only_names_in_use() -> None:
    said = wordings()
    for name in MEANINGS:
        assert len(said.get(name, {})) > 1, f"{name}: one wording or none; drop it from MEANINGS"


def test_each_old_spelling_stands_beside_its_new_name() -> None:
    """Every renamed option parses both names (the old one until the next release)."""
    declared = {
        (path[0], name): param.opts
        for path, cmd, _ in ALL
        if path
        for param in cmd.params
        for name in param.opts
    }
    for command, renamed in RENAMED.items():
        for old, new in renamed.items():
            opts = declared.get((command, old))
            assert opts is not None and new in opts, (command, old, new)


def test_the_reference_arm_is_named_one_way(flatscore: Callable[..., CliResult]) -> None:
    """`--reference` names the reference arm wherever a command takes one."""
    said = wordings()["--reference"]
    assert sorted(said[meaning("Reference arm")]) == [  # in the order commands loaded
        "analyze",
        "embedded-round",
        "export model-card",
        "gate",
        "repair-effect",
        "report",
    ]
    assert "--reference-arm" not in wordings() and "--candidate-arm" not in wordings()
    r = flatscore("margins", "--help")
    assert r.returncode == 0 and "--reference-logits" in r.stdout


def test_usage_lines_name_arguments_as_the_help_does(flatscore: Callable[..., CliResult]) -> None:
    for path, cmd, ctx in ALL:
        if hasattr(cmd, "list_commands"):
            continue
        for param in cmd.params:
            if param.param_type_name != "argument":
                continue
            (piece,) = param.get_usage_pieces(ctx)
            assert re.fullmatch(r"\[?[A-Z][A-Z_-]*\]?(\.\.\.)?", piece), (path, piece)
    r = flatscore("analyze", "--help")
    assert r.returncode == 0 and "analyze [OPTIONS] RUNS..." in r.stdout


@pytest.mark.parametrize(
    ("path", "usage"),
    [
        (["gate"], "gate [OPTIONS] REFERENCE CANDIDATE"),
        (["run"], "run [OPTIONS] [STUDY]"),
        (["archive", "status"], "status [OPTIONS] ARCHIVE [RUNS]"),
    ],
)
def test_a_usage_line(path: list[str], usage: str) -> None:
    cmd, ctx = next((c, x) for p, c, x in ALL if p == path)
    assert cmd.get_usage(ctx).endswith(usage), cmd.get_usage(ctx)


def _option_names(path: list[str]) -> set[str]:
    cmd = next(c for p, c, _ in ALL if p == path)
    return {n for param in cmd.params for n in _current_names(path, param) if n.startswith("--")}


def test_every_analysis_option_is_on_report_and_the_model_card() -> None:
    """What `analyze` reads its runs with, `report` and `export model-card` read them with
    too (less the outputs `analyze` alone writes: --json, --margins)."""
    reading = _option_names(["analyze"]) - {"--json", "--margins", "--help"}
    assert reading <= _option_names(["report"]), reading - _option_names(["report"])
    card = _option_names(["export", "model-card"])
    assert reading <= card, reading - card
