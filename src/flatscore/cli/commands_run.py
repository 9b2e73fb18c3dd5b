"""`flatscore run`: the quick form, without a study file (like τ²'s `tau2 run`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from flatscore.cli.app import app, console
from flatscore.errors import InputError


def _parse_options(pairs: list[str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InputError(f"expected KEY=VALUE, got {pair!r}", field="--agent-opt")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


@app.command("run")
def run_command(
    out: Annotated[Path, typer.Option("--out", help="JSONL file the episodes are appended to.")],
    domain: Annotated[str, typer.Option(help="retail, telecom or all.")] = "all",
    agent: Annotated[str, typer.Option(help="Agent by registered name (oracle, noop, ...).")] = (
        "oracle"
    ),
    user: Annotated[str, typer.Option(help="User simulator (scripted).")] = "scripted",
    split: Annotated[str, typer.Option(help="train, test or all.")] = "test",
    trials: Annotated[int, typer.Option(min=1)] = 1,
    resume: Annotated[bool, typer.Option(help="Skip episodes already in --out.")] = False,
    max_errors: Annotated[int, typer.Option(min=1, help="τ² error budget (recorded).")] = 30,
    counted: Annotated[str, typer.Option(help="Errors counted: all or agent.")] = "all",
    max_steps: Annotated[int, typer.Option(min=1)] = 40,
    concurrency: Annotated[int, typer.Option(min=1)] = 4,
    seed: Annotated[int, typer.Option(help="Base seed; trial t uses seed + t.")] = 300,
    arm: Annotated[str | None, typer.Option(help="Arm label (default: the agent name).")] = None,
    study: Annotated[str, typer.Option(help="Study label.")] = "adhoc",
    task: Annotated[
        list[str] | None, typer.Option("--task", help="Only these task ids (repeatable).")
    ] = None,
    agent_opt: Annotated[
        list[str] | None,
        typer.Option(
            "--agent-opt",
            help="Agent option KEY=VALUE (repeatable; VALUE parsed as JSON when it can be), "
            "e.g. slip_rate=0.2 for a training-data oracle.",
        ),
    ] = None,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
) -> None:
    """Run built-in domain tasks with an agent and a user simulator; write episodes as JSONL."""
    from pydantic import ValidationError

    from flatscore.agents.base import agent_names, make_agent
    from flatscore.domains import domain_names
    from flatscore.runner.run import RunConfig, run
    from flatscore.users.base import make_user, user_names

    domains = domain_names() if domain == "all" else [domain]
    for name in domains:
        if name not in domain_names():
            raise InputError(f"unknown domain {name!r} (known: {', '.join(domain_names())}, all)")
    if agent not in agent_names():
        raise InputError(f"unknown agent {agent!r} (known: {', '.join(agent_names())})")
    options = _parse_options(agent_opt or [])
    try:
        make_agent(agent, **options)
    except (TypeError, ValueError) as exc:
        raise InputError(f"agent {agent!r}: {exc}", field="--agent-opt") from None
    if user not in user_names():
        raise InputError(f"unknown user {user!r} (known: {', '.join(user_names())})")
    try:
        make_user(user)
    except TypeError:
        raise InputError(f"user {user!r} needs a model backend: use it from a study file") from None
    try:
        config = RunConfig(
            domains=domains,
            split=split,
            trials=trials,
            seed=seed,
            max_steps=max_steps,
            max_errors=max_errors,
            counted=counted,
            concurrency=concurrency,
            study=study,
            arm=arm or agent,
            task_ids=task,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(str(first["msg"]), field=".".join(map(str, first["loc"]))) from None

    summary = run(
        config,
        out,
        lambda: make_agent(agent, **options),
        lambda: make_user(user),
        resume=resume,
        progress=progress,
    )
    done = summary.written
    rate = f"{summary.succeeded}/{done}" if done else "0/0"
    console.print(
        f"{out}: {done} episodes written, {summary.skipped} already there; "
        f"success {rate}; terminations {summary.terminations}",
        highlight=False,
    )
