"""`flatscore run`: a study file (`flatscore run study.yaml`), or the quick form without one
(`flatscore run --domain retail --agent oracle --out run.jsonl`, like τ²'s `tau2 run`).

Thin: the quick form's options become a `QuickRun` (a one-model study, `flatscore.run.
quick`), a study file's overrides a `StudyOverrides`; both run through
`flatscore.run.driver.run_study`. Options are grouped in `--help` by the form they apply to."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from flatscore import defaults
from flatscore.cli import legacy
from flatscore.cli.app import app, console
from flatscore.console import styled
from flatscore.defaults import MAX_BUDGET
from flatscore.errors import InputError

if TYPE_CHECKING:
    from flatscore.study import Study


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


QUICK = "Quick form (no study file)"
STUDY = "With a study file"
BOTH = "Both forms"
_quick = partial(typer.Option, rich_help_panel=QUICK)
_study = partial(typer.Option, rich_help_panel=STUDY)
_both = partial(typer.Option, rich_help_panel=BOTH)
"""`typer.Option` in the `--help` panel of the form it applies to."""


def _given(ctx: typer.Context, names: tuple[str, ...]) -> list[str]:
    """Options set on the command line (not left at their defaults). Compared by name:
    typer vendors its own click, whose ParameterSource is not click's."""
    given = []
    for n in names:
        source = getattr(ctx.get_parameter_source(n), "name", "DEFAULT")
        if source in ("COMMANDLINE", "ENVIRONMENT", "PROMPT"):
            given.append("--count" if n == "counted" else "--" + n.replace("_", "-"))
    return given


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


@app.command("run")
def run_command(
    ctx: typer.Context,
    study_file: Annotated[
        Path | None,
        typer.Argument(
            metavar="[STUDY]",
            help="A study file (YAML): run every model × arm × domain, then write the report. "
            "Without it, the quick form runs a one-model study of one agent into --out.",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        _both(
            help="Quick form: the JSONL file episodes are appended to. With a study: "
            "overrides its output folder.",
        ),
    ] = None,
    resume: Annotated[bool, _both(help="Skip episodes already written.")] = False,
    concurrency: Annotated[
        int, _both(min=1, help="Episodes at once (local executor).")
    ] = defaults.CONCURRENCY,
    progress: Annotated[bool, _both(help="Show progress bars.")] = True,
    time_limit: Annotated[
        str | None,
        _both(
            help="Stop cleanly after this long (1h, 45m, 1h30m, 90s), leaving a run that "
            "--resume continues; no report until it is complete."
        ),
    ] = None,
    drain: Annotated[
        str | None,
        _both(
            help="With --time-limit: when the time is up, start no new episode and let those "
            "in flight finish for up to this long (15m), then stop; nothing half run is lost."
        ),
    ] = None,
    domain: Annotated[str, _quick(help="retail, telecom or all.")] = "all",
    agent: Annotated[str, _quick(help="Agent by registered name (oracle, noop, ...).")] = "oracle",
    agent_opt: Annotated[
        list[str] | None,
        _quick(
            help="Agent option KEY=VALUE (repeatable; VALUE parsed as JSON when it can be), "
            "e.g. slip_rate=0.2 for a training-data oracle.",
        ),
    ] = None,
    user: Annotated[str, _quick(help="User simulator (scripted).")] = "scripted",
    split: Annotated[str, _quick(help="train, test or all.")] = defaults.SPLIT,
    task: Annotated[list[str] | None, _quick(help="Only these task ids (repeatable).")] = None,
    trials: Annotated[int, _quick(min=1, help="Trials per task (trial t uses seed + t).")] = (
        defaults.TRIALS
    ),
    seed: Annotated[int, _quick(help="Base seed; trial t uses seed + t.")] = defaults.SEED,
    max_errors: Annotated[
        int,
        _quick(
            min=1,
            max=MAX_BUDGET,
            help="τ² error budget: the episode stops at this many counted failed calls.",
        ),
    ] = defaults.MAX_ERRORS,
    counted: Annotated[
        str,
        _quick(
            "--count",
            "--counted",
            help="Errors counted against --max-errors: all (agent + user, like τ²) or agent "
            + legacy.deprecated("--counted")
            + ".",
        ),
    ] = defaults.COUNTED,
    max_steps: Annotated[
        int, _quick(min=1, help="Messages after the greeting before an episode ends max_steps.")
    ] = defaults.MAX_STEPS,
    arm: Annotated[str | None, _quick(help="Arm label (default: the agent name).")] = None,
    study: Annotated[str, _quick(help="Study label.")] = defaults.QUICK_STUDY_NAME,
    repair: Annotated[
        bool,
        _quick(
            help="Wrap the agent in reflective repair (docs/repair.md); the arm label gets +repair."
        ),
    ] = False,
    repair_channels: Annotated[
        str, _quick(help="Channels that trigger repair, comma-separated.")
    ] = ",".join(defaults.REPAIR_TRIGGER_CHANNELS),
    repair_attempts: Annotated[
        int, _quick(min=1, help="Repair instructions per failure.")
    ] = defaults.REPAIR_ATTEMPTS,
    executor: Annotated[
        str | None, _study(help="Where episodes run, local or ray (default: the study's).")
    ] = None,
    ray_address: Annotated[
        str | None, _study(help="ray: ray://HOST:10001 or auto (default: a local instance).")
    ] = None,
    ray_cpus: Annotated[
        int | None, _study(min=1, help="ray: CPUs of a local Ray instance.")
    ] = None,
    report: Annotated[
        bool, _study(help="Analyse and write the report when the runs finish.")
    ] = True,
) -> None:
    """Run a study file, or (quick form) built-in domain tasks with one agent: a one-model
    study written to one JSONL file. Both go through the same planner and executors."""
    if study_file is not None:
        bad = _given(ctx, QUICK_ONLY)
        if bad:
            raise InputError(
                f"{', '.join(bad)}: for the quick form only; set it in the study file",
                file=str(study_file),
            )
        overrides = StudyOverrides(
            out=out,
            concurrency=concurrency if _given(ctx, ("concurrency",)) else None,
            executor=executor,
            ray_address=ray_address,
            ray_cpus=ray_cpus,
        )
        with _time_limit(time_limit, drain):
            _run_study(study_file, overrides, resume=resume, progress=progress, report=report)
        return
    bad = _given(ctx, STUDY_ONLY)
    if bad:
        raise InputError(f"{', '.join(bad)}: for a study file only")
    if out is None:
        raise InputError("give a study file, or --out FILE for the quick form", field="--out")
    # Imported here, not at the top: the run path imports the analysis stack (scipy,
    # statsmodels: seconds), and every command module is imported for every command.
    from flatscore.agents.repair import parse_channels
    from flatscore.run.quick import QuickRun, run_quick

    if counted not in ("all", "agent"):  # named as typed (the model's field is `counted`)
        raise InputError(f"expected all or agent, got {counted!r}", field="--count")
    quick = QuickRun.parse(
        agent=agent,
        agent_options=_parse_options(agent_opt or []),
        user=user,
        domains=[domain],
        split=split,
        task_ids=task,
        trials=trials,
        seed=seed,
        max_steps=max_steps,
        max_errors=max_errors,
        counted=counted,
        concurrency=concurrency,
        study=study,
        arm=arm,
        repair={
            "mode": "on" if repair else "off",
            "channels": parse_channels(repair_channels),
            "attempts": repair_attempts,
        },
    )
    outcome = None
    with _time_limit(time_limit, drain):
        outcome = run_quick(quick, out, resume=resume, progress=progress)
    if outcome is None:  # stopped at the time limit
        return
    done = outcome.written
    rate = f"{outcome.succeeded}/{done}" if done else "0/0"
    console.print(
        f"{out}: {done} episodes written, {outcome.skipped} already there; "
        f"success {rate}; terminations {outcome.terminations}",
        highlight=False,
        soft_wrap=True,
    )


@contextmanager
def _time_limit(text: str | None, drain: str | None = None) -> Iterator[None]:
    """Run the block under `--time-limit` (nothing without one): when the time is up, the
    run stops as on Ctrl-C — with `--drain`, once the episodes in flight have finished —
    and the command ends with a line, exit code 0."""
    if text is None:
        if drain is not None:
            raise InputError("--drain needs --time-limit", field="--drain")
        yield
        return
    from flatscore.run.time_limit import RunStopped, TimeLimit, parse_duration

    drain_s = 0.0 if drain is None else parse_duration(drain, "--drain")
    limit = TimeLimit(parse_duration(text), drain_s=drain_s)
    try:
        with limit:
            yield
    except (KeyboardInterrupt, RunStopped) as stop:
        if not limit.reached:
            raise
        how = (
            "stopped once the episodes in flight had finished"
            if isinstance(stop, RunStopped)
            else "stopped"
        )
        console.print(
            f"time limit {text} reached: {how}; every finished episode is in the run files "
            "(continue with --resume)",
            highlight=False,
            soft_wrap=True,
        )
    finally:
        from flatscore.models.shared import clear_backends

        # Stop the engine threads before the interpreter exits: an interrupt can leave them
        # inside a torch op at exit, which aborts the process.
        clear_backends()


@dataclass(frozen=True)
class StudyOverrides:
    """Command-line settings that override a study file's (None: keep the file's)."""

    out: Path | None
    concurrency: int | None
    executor: str | None
    ray_address: str | None
    ray_cpus: int | None

    def apply(self, study: Study) -> Study:

        from flatscore.errors import validating
        from flatscore.run.checks import check_executor_kind
        from flatscore.run.executors import RayExecutor
        from flatscore.study import ExecutorSpec

        updates: dict[str, Any] = {}
        if self.out is not None:
            updates["output"] = str(self.out.resolve())
        if self.concurrency is not None:
            updates["concurrency"] = self.concurrency
        ex = study.executor
        if self.executor is not None:
            with validating(field=lambda loc: "--executor"):
                ex = ExecutorSpec.model_validate({**ex.model_dump(), "kind": self.executor})
            try:  # the registry knows the names
                check_executor_kind(ex.kind)
            except ValueError as exc:
                raise InputError(str(exc), field="--executor") from None
        if self.ray_address is not None or self.ray_cpus is not None:
            if ex.kind != RayExecutor.name:
                raise InputError("--ray-address/--ray-cpus need --executor ray", field="--executor")
            ex = ex.model_copy(
                update={
                    "address": self.ray_address or ex.address,
                    "num_cpus": self.ray_cpus or ex.num_cpus,
                }
            )
        updates["executor"] = ex
        return study.model_copy(update=updates)


def _run_study(
    path: Path, overrides: StudyOverrides, *, resume: bool, progress: bool, report: bool
) -> None:
    # Imported here: the analysis stack is slow to import (see run_command).
    from flatscore.run.driver import print_outcome, run_study
    from flatscore.run.executors import LocalExecutor
    from flatscore.run.study import load_study

    study = overrides.apply(load_study(path))
    ex = study.executor
    where = (
        f"concurrency {study.concurrency}"
        if ex.kind == LocalExecutor.name
        else ex.address or f"a local instance, {ex.num_cpus or 'all'} CPUs"
    )
    console.print(
        styled(
            "study ",
            (study.name, "bold"),
            f" → {study.output_dir} (executor {ex.kind}: {where})",
        )
    )
    outcome = run_study(study, resume=resume, progress=progress, report=report)
    print_outcome(outcome, console)
