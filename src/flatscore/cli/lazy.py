"""Command modules are imported when their command runs, not when `flatscore` starts: the
help lists every command from `COMMANDS` (name → module and one-line summary), and the group
imports a module only to run (or show the help of) one of its commands. `flatscore --help`
and `flatscore version` so never import numpy, torch, transformers or pandas, and a command
module may import what it needs at its top.

A new command: register it on `app` in its module (`@app.command()` / `app.add_typer`) and
add one line here (tests/cli/test_lazy.py checks the summaries match the docstrings). A
module imported eagerly (from `flatscore.cli`) still works: what it registered is listed too.
"""

from __future__ import annotations

import importlib
from difflib import get_close_matches
from typing import Any, NamedTuple

import typer
from typer import _click as click  # typer's own copy of click: its commands are these
from typer.core import TyperCommand, TyperGroup
from typer.main import get_command_from_info, get_group_from_info


class Lazy(NamedTuple):
    module: str | tuple[str, ...]
    """The module(s) under `flatscore.cli` that register the command (a group's
    subcommands may come from several)."""
    summary: str
    """What `flatscore --help` says of it: the first paragraph of its docstring."""


COMMANDS: dict[str, Lazy] = {
    "analyze": Lazy(
        "commands_analyze",
        "Per-channel error rates, S(K), amplification, invariance, recovery and paired statistics.",
    ),
    "power": Lazy(
        "commands_analyze",
        "The smallest Gap(K) a study of this size detects with 80% power (simulation).",
    ),
    "serve": Lazy(
        "commands_serve",
        "Serve a local model in one precision arm at /v1/chat/completions (torch, or "
        "llama.cpp with --kind gguf).",
    ),
    "report": Lazy(
        "commands_report",
        "Rebuild the report (report.html, summary.md, analysis.json, tables.md) from episode "
        "logs: the same logs and settings give the same bytes.",
    ),
    "run": Lazy(
        "commands_run",
        "Run a study file, or (quick form) built-in domain tasks with one agent: a one-model "
        "study written to one JSONL file. Both go through the same planner and executors.",
    ),
    "demo": Lazy(
        "commands_demo",
        "Run a slice of study v2 live (the reference, the planted control and int4-awq on "
        "every retail template and 6 of telecom's), compare every episode with the archived "
        "one, then write the whole study's report with the reproduced count on top.",
    ),
    "train-embedded": Lazy(
        "commands_train",
        "Fine-tune the recipe's base (SmolLM2-135M-Instruct or Gemma 3 270M; LoRA, CPU) on "
        "oracle episodes of the train split, or on the agent's own failed states (an "
        "on-policy recipe).",
    ),
    "eval-embedded": Lazy(
        "commands_train",
        "Evaluate the embedded agent: test split, both domains, scripted user, greedy, per arm.",
    ),
    "embedded-card": Lazy(
        "commands_train",
        "Write the embedded adapter's model card from the training and evaluation files.",
    ),
    "embedded-round": Lazy(
        "commands_train",
        "An on-policy round's numbers for the reference on the test set, against the targets.",
    ),
    "margins": Lazy(
        "commands_margins",
        "Flip rate by reference logit margin, margins at tool-name tokens, winning alternatives.",
    ),
    "repair-effect": Lazy(
        "commands_repair",
        "Repair effect S_with(K) − S_without(K) per arm, and its interaction with precision.",
    ),
    "gate": Lazy(
        "commands_gate",
        "May the candidate replace the reference? Exit 0 pass, 3 damage, 4 inconclusive.",
    ),
    # `import` and `export` are both registered by commands_import (loading one builds the
    # other): each names every module that adds subcommands to either.
    "import": Lazy(
        ("commands_import", "commands_inspect", "commands_model_card"),
        "Import other benchmarks' result files as flatscore runs.",
    ),
    "export": Lazy(
        ("commands_import", "commands_inspect", "commands_model_card"),
        "Export runs: flat tables, Inspect logs, model cards.",
    ),
    "arms": Lazy(
        "commands_arms",
        "Precision arms made by a quantization toolchain (llm-compressor checkpoints).",
    ),
    "archive": Lazy(
        "commands_archive", "Move a study's run files through git as append-only xz chunks."
    ),
}


class LazyGroup(TyperGroup):
    """The root group: lists `COMMANDS` without importing them, imports one on use."""

    app: typer.Typer | None = None
    """The app the command modules register on (set by `flatscore.cli.app`)."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self._listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        loaded = super().list_commands(ctx)
        return loaded + [name for name in COMMANDS if name not in self.commands]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            lazy = COMMANDS[cmd_name]
            if self._listing:  # the help's table needs a name and a line, not the module
                return TyperCommand(cmd_name, help=lazy.summary)
            self._load(lazy.module)
        return self.commands.get(cmd_name)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """As typer's, with the not-yet-imported names among the typo suggestions."""
        try:
            return super().resolve_command(ctx, args)
        except click.exceptions.UsageError as exc:
            matches = get_close_matches(args[0], self.list_commands(ctx)) if args else []
            if matches and "Did you mean" not in exc.message:
                suggestions = ", ".join(repr(m) for m in matches)
                exc.message = f"{exc.message.rstrip('.')}. Did you mean {suggestions}?"
            raise

    def _load(self, modules: str | tuple[str, ...]) -> None:
        """Import `flatscore.cli.<module>` and add what it registered on the app."""
        for module in (modules,) if isinstance(modules, str) else modules:
            importlib.import_module(f"flatscore.cli.{module}")
        app = self.app
        assert app is not None, "LazyGroup.app is set by flatscore.cli.app"
        for info in app.registered_commands:
            command = get_command_from_info(
                info,
                pretty_exceptions_short=app.pretty_exceptions_short,
                rich_markup_mode=app.rich_markup_mode,
            )
            if command.name and command.name not in self.commands:
                self.commands[command.name] = command
        for group_info in app.registered_groups:
            group = get_group_from_info(
                group_info,
                pretty_exceptions_short=app.pretty_exceptions_short,
                rich_markup_mode=app.rich_markup_mode,
                suggest_commands=app.suggest_commands,
            )
            if group.name and group.name not in self.commands:
                self.commands[group.name] = group
