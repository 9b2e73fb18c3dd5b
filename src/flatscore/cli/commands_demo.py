"""`flatscore demo`: the embedded agent in three precision arms, both domains, then the report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flatscore.cli import options as opt
from flatscore.cli.app import app, console
from flatscore.errors import InputError, from_validation


@app.command()
def demo(
    out: Annotated[Path, typer.Option("--out", help="Output folder.")] = Path("flatscore-demo"),
    tasks: Annotated[
        int,
        typer.Option(
            min=1,
            help="Test tasks per domain (the default fits 20 min on 2 cores, fp32).",
        ),
    ] = 9,  # = flatscore.run.demo.DEMO_TASKS (kept literal: --help must not import the demo)
    arms: Annotated[
        str, typer.Option(help="Comma-separated precision arms.")
    ] = "ref,int8,int4-awq",
    concurrency: Annotated[
        int, typer.Option(min=1, help="Episodes in flight (batched per arm).")
    ] = 64,
    repair: Annotated[
        str,
        typer.Option(
            help="Reflective repair: off, on, or both (every arm with and without; ~2× the time)."
        ),
    ] = "off",
    compute: Annotated[
        str,
        typer.Option(
            help="fp32, bf16 (linear layers in bf16: faster on CPUs with AMX) or auto "
            "(bf16 where the CPU has AMX, else fp32)."
        ),
    ] = "auto",
    planted: Annotated[
        str | None,
        typer.Option(
            help="P,Q: add a positive control, the first arm with planted damage (role "
            "confusion with probability P, a dropped required argument with probability Q "
            "per agent tool call; docs/arms.md)."
        ),
    ] = None,
    fresh: Annotated[bool, typer.Option(help="Start over instead of resuming.")] = False,
    progress: opt.ProgressBars = True,
) -> None:
    """Run the embedded agent in ref / int8 / int4-awq on both built-in domains
    (test split, scripted user), write the report and print the headline verdicts."""
    from pydantic import ValidationError

    from flatscore.run.demo import demo_study, run_demo
    from flatscore.run.study import check_names

    arm_list = tuple(a.strip() for a in arms.split(",") if a.strip())
    if not arm_list:
        raise InputError("give at least one arm", field="--arms")
    if compute == "auto":
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
            tasks_per_domain=tasks,
            arms=arm_list,
            concurrency=concurrency,
            repair=repair,
            compute=compute,
        )
    except ValidationError as exc:
        raise from_validation(exc, field=_flag) from None
    check_names(study)
    run_demo(study, fresh=fresh, progress=progress, console=console)


def _flag(loc: tuple[int | str, ...]) -> str:
    """The demo flag behind a study validation error's location."""
    if loc and loc[0] == "repair":
        return "--repair"
    if "inject" in loc:
        return "--planted"
    return "--compute" if "compute" in loc else "--arms"
