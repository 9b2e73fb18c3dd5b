"""`flatscore demo`: a slice of study v2 run live and compared with its archive, then the
whole study's report; `--fresh`: a small new study of your own instead."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flatscore.cli import options as opt
from flatscore.cli.app import app, console
from flatscore.errors import InputError, from_validation

FRESH_ONLY = ("tasks", "repair", "compute", "planted")


@app.command()
def demo(
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Output folder (default flatscore-demo; with --fresh flatscore-demo-fresh).",
        ),
    ] = None,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify/--no-verify",
            help="Run study v2's slice live and compare it with the archive (--no-verify: "
            "only the report of the archived study).",
        ),
    ] = True,
    fresh: Annotated[
        bool,
        typer.Option(
            help="A small new study of your own (9 test tasks per domain, ref / int8 / "
            "int4-awq) instead of reproducing study v2; resumes one that stopped."
        ),
    ] = False,
    tasks: Annotated[
        int | None,
        typer.Option(min=1, help="--fresh: test tasks per domain (default 9)."),
    ] = None,
    arms: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated arms (default ref,ref-planted,int4-awq; "
            "--fresh: ref,int8,int4-awq)."
        ),
    ] = None,
    concurrency: Annotated[
        int | None, typer.Option(min=1, help="Episodes in flight (batched per arm).")
    ] = None,
    repair: Annotated[
        str | None,
        typer.Option(
            help="--fresh: reflective repair, off, on, or both (every arm with and without)."
        ),
    ] = None,
    compute: Annotated[
        str | None,
        typer.Option(
            help="--fresh: fp32, bf16 (linear layers in bf16: faster on CPUs with AMX) or auto "
            "(bf16 where the CPU has AMX, else fp32; the default). The reproduction is fp32."
        ),
    ] = None,
    planted: Annotated[
        str | None,
        typer.Option(
            help="--fresh: P,Q adds a positive control, the first arm with planted damage (role "
            "confusion with probability P, a dropped required argument with probability Q "
            "per agent tool call; docs/arms.md)."
        ),
    ] = None,
    progress: opt.ProgressBars = True,
) -> None:
    """Run a slice of study v2 live (the reference, the planted control and int4-awq on
    every retail template and 6 of telecom's), compare every episode with the archived one,
    then write the whole study's report with the reproduced count on top."""
    arm_list = tuple(a.strip() for a in arms.split(",") if a.strip()) if arms else None
    if arms is not None and not arm_list:
        raise InputError("give at least one arm", field="--arms")
    if fresh:
        _fresh(out or Path("flatscore-demo-fresh"), tasks, arm_list, concurrency, repair,
               compute, planted, progress)  # fmt: skip
        return
    given = {"tasks": tasks, "repair": repair, "compute": compute, "planted": planted}
    for name in FRESH_ONLY:
        if given[name] is not None:
            raise InputError(
                "applies to --fresh only (the reproduction runs study v2's own settings)",
                field=f"--{name}",
            )
    from flatscore.run.reproduce import SLICE_ARMS, SLICE_CONCURRENCY, run_reproduction

    run_reproduction(
        out or Path("flatscore-demo"),
        verify=verify,
        arms=arm_list or SLICE_ARMS,
        concurrency=concurrency or SLICE_CONCURRENCY,
        progress=progress,
        console=console,
    )


def _fresh(
    out: Path,
    tasks: int | None,
    arm_list: tuple[str, ...] | None,
    concurrency: int | None,
    repair: str | None,
    compute: str | None,
    planted: str | None,
    progress: bool,
) -> None:
    """The embedded agent in ref / int8 / int4-awq on both built-in domains (test split,
    scripted user), its report and headline verdicts."""
    from pydantic import ValidationError

    from flatscore.run.checks import check_study
    from flatscore.run.demo import (
        DEMO_ARMS,
        DEMO_CONCURRENCY,
        DEMO_TASKS,
        demo_study,
        run_demo,
    )

    if compute is None or compute == "auto":
        from flatscore.models.compute import auto_compute

        compute = auto_compute()
    rates: tuple[float, float] | None = None
    if planted is not None:
        try:
            p, q = (float(x) for x in planted.split(","))
        except ValueError:
            raise InputError(f"{planted!r}: give two rates, P,Q", field="--planted") from None
        rates = (p, q)
    try:
        study = demo_study(
            out,
            planted=rates,
            tasks_per_domain=tasks or DEMO_TASKS,
            arms=arm_list or DEMO_ARMS,
            concurrency=concurrency or DEMO_CONCURRENCY,
            repair=repair or "off",
            compute=compute,
        )
    except ValidationError as exc:
        raise from_validation(exc, field=_flag) from None
    check_study(study, field=_flag)
    run_demo(study, progress=progress, console=console)


def _flag(loc: tuple[int | str, ...]) -> str:
    """The demo flag behind a study validation error's location."""
    if loc and loc[0] == "repair":
        return "--repair"
    if "inject" in loc:
        return "--planted"
    return "--compute" if "compute" in loc else "--arms"
