"""`flatscore analyze` and `flatscore power`: parse flags, call one function, print."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from flatscore import defaults
from flatscore.cli import legacy
from flatscore.cli import options as opt
from flatscore.cli.app import app, console
from flatscore.console import styled
from flatscore.errors import InputError


@app.command()
@opt.settings_flags()
def analyze(
    runs: opt.Runs,
    reference: opt.Reference = None,
    json_out: opt.JsonOut = None,
    budgets: opt.Budgets = None,
    flags: dict[str, Any] | None = None,
    channel_rules: opt.ChannelRules = None,
    margins: Annotated[
        Path | None,
        typer.Option(help="Attach a 'flatscore margins' result (margins.json) to the output."),
    ] = None,
    dedupe: opt.Dedupe = False,
    balanced: opt.Balanced = False,
    sequential: opt.Sequential = False,
    fixed_design: opt.FixedDesign = False,
    trials: opt.Trials = None,
) -> None:
    """Per-channel error rates, S(K), amplification, invariance, recovery and paired statistics."""
    from flatscore.cli import json_out as out
    from flatscore.formats.pipeline import analyze_runs, expand_inputs
    from flatscore.report import analysis_json
    from flatscore.report.terminal import render

    options = opt.analysis_settings(
        reference=reference,
        budgets=budgets,
        channel_rules=channel_rules,
        dedupe=dedupe,
        balanced=balanced,  # applied and recorded by the analysis
        sequential=sequential or None,
        fixed_design=fixed_design or None,
        trials=trials,  # likewise
        **(flags or {}),
    )
    paths = expand_inputs(runs)
    out.check(json_out, paths)
    with console.status("reading episodes and bootstrapping…"):
        result = analyze_runs(paths, options, margins=margins).result
    if json_out == out.STDOUT:  # the JSON alone on stdout, for machines
        out.write(analysis_json(result), json_out)
        return
    render(result, console)
    if json_out is not None and out.write(analysis_json(result), json_out):
        console.print(f"wrote {json_out}", style="dim")


def _parse_rates(text: str) -> dict[str, float]:
    """`channel=rate,…` → rates; a channel flatscore does not know, a rate outside [0, 1),
    or no rate at all is one InputError naming --rates."""
    from flatscore.analysis.channels import CHANNELS

    rates: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        name = name.strip()
        try:
            rate = float(value)
        except ValueError:
            sep = ""
        if not sep or not name:
            raise InputError(f"expected channel=rate, got {part!r}", field="--rates")
        if name not in CHANNELS:
            raise InputError(
                f"unknown channel {name!r}; known: {', '.join(CHANNELS)}", field="--rates"
            )
        if not 0 <= rate < 1:
            raise InputError(
                f"expected a per-call rate in [0, 1) for {name}, got {value.strip()}",
                field="--rates",
            )
        rates[name] = rate
    if not rates:
        raise InputError("no rates given", field="--rates")
    return rates


def _success_fraction(points: float) -> float:
    """--success in points (60 = 60%); a value ≤ 1 is read as the fraction it used to be."""
    if 0 < points <= 1:
        from flatscore.cli.app import err_console

        err_console.print(
            f"warning: --success {points:g} read as a fraction ({100 * points:g} points); "
            "--success is in points now (a fraction is accepted until the next release)",
            style="yellow",
        )
        return points
    if not 0 < points < 100:
        raise InputError(
            f"expected a success rate in (0, 100) points, got {points:g}", field="--success"
        )
    return points / 100


@app.command()
def power(
    success: Annotated[
        float | None,
        typer.Option(help="Reference success rate, in points (60 = 60% of tasks)."),
    ] = None,
    rates: Annotated[
        str | None,
        typer.Option(
            help="Per-call error rates by channel, fractions of agent calls, e.g. "
            "unknown_tool=0.1,bad_arguments=0.02."
        ),
    ] = None,
    tasks: Annotated[int | None, typer.Option(min=1, help="Tasks in the study.")] = None,
    trials: Annotated[int, typer.Option(min=1, help="Trials per task.")] = 1,
    k: Annotated[
        int,
        typer.Option(
            "--tight-budget",
            "--K",
            min=0,
            help="The tight error budget K at which to detect the gap "
            + legacy.deprecated("--K")
            + ".",
        ),
    ] = defaults.TIGHT_K,
    calls: Annotated[int, typer.Option(min=1, help="Agent tool calls per episode.")] = 10,
    simulations: Annotated[
        int, typer.Option(min=10, help="Simulated studies per amplification level (per gap).")
    ] = 500,
    seed: Annotated[int, typer.Option(help="Simulation seed.")] = defaults.ANALYSIS_SEED,
    sequential: Annotated[
        bool,
        typer.Option(
            "--sequential",
            help="Size a sequential study from a pilot (--pilot): tasks to a decision per gap.",
        ),
    ] = False,
    pilot: Annotated[
        list[Path] | None, typer.Option(help="A pilot's run files (repeat the flag).")
    ] = None,
    reference: Annotated[str | None, typer.Option(help="The pilot's reference arm.")] = None,
    arm: Annotated[
        str | None, typer.Option(help="The pilot arm whose pairing sets the coupling.")
    ] = None,
    domain: Annotated[str | None, typer.Option(help="The pilot's domain (cell).")] = None,
    gaps: Annotated[
        str, typer.Option(help="Success gaps to size for, in points (comma-separated).")
    ] = "0,5,10,20",
    max_tasks: Annotated[
        int, typer.Option(help="The sequential design's maximum: tasks of the fixed design.")
    ] = 114,
) -> None:
    """The smallest Gap(K) a study of this size detects with 80% power (simulation).

    With --sequential: the tasks a sequential study needs to decide, from a pilot's run
    files."""
    from rich.table import Table

    if sequential:
        _sequential_power(
            pilot or [], reference, arm, domain, gaps, max_tasks, trials, simulations, seed
        )
        return
    if success is None or rates is None or tasks is None:
        raise InputError("needs --success, --rates and --tasks (or --sequential --pilot FILE)")

    from flatscore.analysis.power import power_analysis

    fraction = _success_fraction(success)
    parsed = _parse_rates(rates)
    if not 0 < sum(parsed.values()) < 1:
        raise InputError("the summed per-call error rates must be in (0, 1)", field="--rates")
    result = power_analysis(
        fraction, parsed, tasks=tasks, trials=trials, k=k, calls=calls,
        simulations=simulations, seed=seed,
    )  # fmt: skip
    table = Table(title=f"power at K={k}: {tasks} tasks × {trials} trial(s), {calls} calls/episode")
    for col in ("amplification", f"Gap({k}) (points)", "power"):
        table.add_column(col, justify="right")
    for row in result.rows:
        table.add_row(f"×{row.multiplier:.2f}", f"{100 * row.gap:.1f}", f"{row.power:.0%}")
    console.print(table)
    if result.detectable_gap is None:
        console.print(
            f"no gap up to ×{result.max_multiplier:g} amplification reaches "
            f"{result.target_power:.0%} power"
        )
    else:
        console.print(
            styled(
                f"smallest Gap({result.K}) detected with ≥ {result.target_power:.0%} power: ",
                (f"{100 * result.detectable_gap:.1f} points", "bold"),
                f" (error rates ×{result.detectable_multiplier:.2f})",
            )
        )


def _sequential_power(
    pilot: list[Path],
    reference: str | None,
    arm: str | None,
    domain: str | None,
    gaps: str,
    max_tasks: int,
    trials: int,
    simulations: int,
    seed: int,
) -> None:
    from rich.table import Table

    from flatscore.analysis.sequential_power import pilot_from_episodes, sequential_power
    from flatscore.report.sequential_text import coupling_source

    if not pilot:
        raise InputError("--sequential needs the pilot's run files", field="--pilot")
    try:
        points = [float(g) for g in gaps.split(",") if g.strip()]
    except ValueError:
        raise InputError(
            f"expected gaps in points, e.g. 0,5,10, got {gaps!r}", field="--gaps"
        ) from None
    if not points or any(not 0 <= g < 100 for g in points):
        raise InputError(f"gaps must lie in [0, 100) points, got {gaps!r}", field="--gaps")
    if max_tasks < 1 or simulations < 1:
        raise InputError("--max-tasks and --simulations must be positive")
    from flatscore.formats import load_runs

    episodes = [ep for path in pilot for ep in load_runs([path])]  # each file read alone
    found = pilot_from_episodes(episodes, reference, arm, domain)
    result = sequential_power(
        found,
        [g / 100 for g in points],
        max_tasks=max_tasks,
        trials=trials if trials > 1 else found.trials,
        simulations=simulations,
        seed=seed,
    )
    table = Table(
        title=(
            f"sequential study: up to {result.max_tasks} tasks × {result.trials} trial(s); "
            f"pilot {result.pilot_tasks} tasks, coupling {result.coupling:.2f}"
        )
    )
    for col in ("gap (points)", "decided", "visible damage", "flat score, amplified",
                "no damage", "median tasks", "expected tasks", "expected episodes"):  # fmt: skip
        table.add_column(col, justify="right")
    for row in result.rows:
        v = row.verdicts
        table.add_row(
            f"{100 * row.gap:g}",
            f"{row.decided:.0%}",
            f"{v['visible damage']:.0%}",
            f"{v['flat score, amplified failures']:.0%}",
            f"{v['no damage detected']:.0%}",
            f"{row.median_tasks:g}",
            f"{row.mean_tasks:.1f}",
            f"{row.mean_episodes:.0f}",
        )
    console.print(table)
    console.print(
        f"coupling: {coupling_source(result.coupled)}; {result.simulations} simulated studies "
        f"per gap, seed {result.seed}; expected = mean over studies, undecided ones at the maximum"
    )
