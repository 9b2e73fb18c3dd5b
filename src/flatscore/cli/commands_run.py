"""`flatscore run`: a study file (`flatscore run study.yaml`), or the quick form without one
(`flatscore run --domain retail --agent oracle --out run.jsonl`, like τ²'s `tau2 run`)."""

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


QUICK_ONLY = (
    "domain",
    "agent",
    "user",
    "split",
    "trials",
    "max_errors",
    "counted",
    "max_steps",
    "seed",
    "arm",
    "study",
    "task",
    "agent_opt",
    "repair",
    "repair_channels",
    "repair_attempts",
)
STUDY_ONLY = ("executor", "ray_address", "ray_cpus", "report")


def _given(ctx: typer.Context, names: tuple[str, ...]) -> list[str]:
    """Options set on the command line (not left at their defaults). Compared by name:
    typer vendors its own click, whose ParameterSource is not click's."""
    given = []
    for n in names:
        source = getattr(ctx.get_parameter_source(n), "name", "DEFAULT")
        if source in ("COMMANDLINE", "ENVIRONMENT", "PROMPT"):
            given.append("--" + n.replace("_", "-"))
    return given


@app.command("run")
def run_command(
    ctx: typer.Context,
    study_file: Annotated[
        Path | None,
        typer.Argument(
            metavar="[STUDY]",
            help="A study file (YAML): run every model × arm × domain, then write the report. "
            "Without it, the quick form runs one agent (--domain, --agent, --out).",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Quick form: the JSONL file episodes are appended to. With a study: "
            "overrides its output folder.",
        ),
    ] = None,
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
    repair: Annotated[
        bool,
        typer.Option(
            help="Wrap the agent in reflective repair (docs/repair.md); the arm label gets +repair."
        ),
    ] = False,
    repair_channels: Annotated[
        str, typer.Option(help="Channels that trigger repair, comma-separated.")
    ] = "unknown_tool",
    repair_attempts: Annotated[
        int, typer.Option(min=1, help="Repair instructions per failure.")
    ] = 3,
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
    executor: Annotated[
        str | None,
        typer.Option(help="Study: where episodes run, local or ray (default: the study's)."),
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option(help="Study, ray: ray://HOST:10001 or auto (default: a local instance)."),
    ] = None,
    ray_cpus: Annotated[
        int | None, typer.Option(min=1, help="Study, ray: CPUs of a local Ray instance.")
    ] = None,
    report: Annotated[
        bool, typer.Option(help="Study: analyse and write the report when the runs finish.")
    ] = True,
) -> None:
    """Run a study file, or (quick form) built-in domain tasks with one agent."""
    if study_file is not None:
        bad = _given(ctx, QUICK_ONLY)
        if bad:
            raise InputError(
                f"{', '.join(bad)}: for the quick form only; set it in the study file",
                file=str(study_file),
            )
        _run_study(
            study_file,
            out,
            resume=resume,
            progress=progress,
            concurrency=concurrency if _given(ctx, ("concurrency",)) else None,
            executor=executor,
            ray_address=ray_address,
            ray_cpus=ray_cpus,
            report=report,
        )
        return
    bad = _given(ctx, STUDY_ONLY)
    if bad:
        raise InputError(f"{', '.join(bad)}: for a study file only")
    if out is None:
        raise InputError("give a study file, or --out FILE for the quick form", field="--out")
    from pydantic import ValidationError

    from flatscore.agents.base import Agent, agent_names, make_agent
    from flatscore.agents.repair import make_repair_config, repair_arm_label, with_repair
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

    def agent_factory() -> Agent:
        return make_agent(agent, **options)

    label = arm or agent
    if repair:
        agent_factory = with_repair(
            agent_factory, make_repair_config(repair_channels, repair_attempts)
        )
        label = repair_arm_label(label)
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
            arm=label,
            task_ids=task,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(str(first["msg"]), field=".".join(map(str, first["loc"]))) from None

    summary = run(
        config,
        out,
        agent_factory,
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


def _run_study(
    path: Path,
    out: Path | None,
    *,
    resume: bool,
    progress: bool,
    concurrency: int | None,
    executor: str | None,
    ray_address: str | None,
    ray_cpus: int | None,
    report: bool,
) -> None:
    from rich.markup import escape as esc

    from flatscore.study import load_study
    from flatscore.study_run import print_outcome, run_study

    study = load_study(path)
    updates: dict[str, Any] = {}
    if out is not None:
        updates["output"] = str(out.resolve())
    if concurrency is not None:
        updates["concurrency"] = concurrency
    ex = study.executor
    if executor is not None:
        if executor not in ("local", "ray"):
            raise InputError(f"expected local or ray, got {executor!r}", field="--executor")
        ex = ex.model_copy(update={"kind": executor})
    if ray_address is not None or ray_cpus is not None:
        if ex.kind != "ray":
            raise InputError("--ray-address/--ray-cpus need --executor ray", field="--executor")
        ex = ex.model_copy(
            update={"address": ray_address or ex.address, "num_cpus": ray_cpus or ex.num_cpus}
        )
    updates["executor"] = ex
    study = study.model_copy(update=updates)
    where = (
        f"concurrency {study.concurrency}"
        if ex.kind == "local"
        else ex.address or f"a local instance, {ex.num_cpus or 'all'} CPUs"
    )
    console.print(
        f"study [bold]{esc(study.name)}[/] → {esc(str(study.output_dir))} "
        f"(executor {ex.kind}: {esc(where)})",
        highlight=False,
        soft_wrap=True,
    )
    outcome = run_study(study, resume=resume, progress=progress, report=report)
    print_outcome(outcome, console)
