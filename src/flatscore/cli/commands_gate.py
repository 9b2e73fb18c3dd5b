"""`flatscore gate REFERENCE CANDIDATE`: may the candidate replace the reference? (docs/gate.md)

Exit codes: 0 pass, 3 damage found, 4 inconclusive; 2 bad input and 1 a file-system error,
as in every command."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flatscore import defaults
from flatscore.cli import options as opt
from flatscore.cli.app import app, console
from flatscore.errors import InputError

if TYPE_CHECKING:
    from flatscore.analysis.gate import GateResult

FIRST_LINE = 200
"""The most characters of the gate's first line (what a CI log shows of a step)."""


def gate_lines(result: GateResult) -> list[str]:
    """The gate's verdict as a CI log shows it: a first line of at most `FIRST_LINE`
    characters (the verdict and each domain's), then the paragraph's details below it."""
    from flatscore.report.gate_text import HEADLINES

    head = HEADLINES[result.verdict]
    domains = "; ".join(f"{c.domain}: {c.verdict}" for c in result.cells)
    first = f"{head} ({domains})" if domains else head
    if len(first) > FIRST_LINE:
        first = first[: FIRST_LINE - 1] + "…"
    rest = result.summary.removeprefix(head).strip()
    return [first, rest] if rest else [first]


@app.command()
def gate(
    reference: Annotated[
        Path, typer.Argument(help="The reference's runs: a JSONL run, a run folder, τ² results.")
    ],
    candidate: Annotated[Path, typer.Argument(help="The candidate's runs (same kinds).")],
    reference_arm: opt.GateReference = None,
    candidate_arm: opt.GateCandidate = None,
    margin: opt.GateTostMargin = opt.TOST_MARGIN_POINTS,
    tight_budget: opt.TightBudget = defaults.TIGHT_K,
    default_budget: Annotated[
        int | None,
        typer.Option(
            min=0, help="The default budget K (default: recorded max_errors − 1, τ²'s 9)."
        ),
    ] = None,
    channels: Annotated[
        str | None,
        typer.Option(
            help="Channels that block when amplified, e.g. unknown_tool,bad_arguments "
            "(default: every channel)."
        ),
    ] = None,
    count: opt.Count = defaults.COUNT,
    bootstrap: opt.Bootstrap = defaults.BOOTSTRAP,
    seed: opt.BootstrapSeed = defaults.ANALYSIS_SEED,
    json_out: Annotated[
        Path | None,
        typer.Option(
            "--json",
            help="Also write the verdict as JSON to this path ('-': stdout, instead of the "
            "paragraph; a bare --json, the old flag, means '-' until the next release).",
        ),
    ] = None,
    dedupe: opt.Dedupe = False,
    sequential: opt.Sequential = False,
    fixed_design: opt.FixedDesign = False,
    max_tasks: Annotated[
        int | None,
        typer.Option(
            min=1, help="--sequential: the design's maximum paired tasks (default: the data's)."
        ),
    ] = None,
) -> None:
    """May the candidate replace the reference? Exit 0 pass, 3 damage, 4 inconclusive."""
    from flatscore.analysis.gate import GateOptions, NoComparison
    from flatscore.analysis.outputs import rounded_json
    from flatscore.analysis.recorded import fill_recorded, is_sequential_run, recorded_comparisons
    from flatscore.cli import json_out as out
    from flatscore.formats.pipeline import gate_labelled, labelled_runs
    from flatscore.report.gate_text import family_note, no_comparison, worded_gate

    chosen = [c.strip() for c in channels.split(",") if c.strip()] if channels else None
    given = {  # a flag left at its default leaves the study's recorded setting to fill it
        "tost_margin": (margin, opt.TOST_MARGIN_POINTS),
        "tight_budget": (tight_budget, defaults.TIGHT_K),
        "bootstrap": (bootstrap, defaults.BOOTSTRAP),
        "seed": (seed, defaults.ANALYSIS_SEED),
        "count": (count, defaults.COUNT),
    }
    options = opt.settings_from_flags(
        GateOptions,
        default_budget=default_budget,
        channels=chosen,
        dedupe=dedupe or None,
        **{k: None if value == default else value for k, (value, default) in given.items()},
    )
    out.check(json_out, [reference, candidate])
    if sequential and fixed_design:
        raise InputError(
            "--sequential and --fixed-design ask for opposite readings; give one",
            field="--fixed-design",
        )
    with console.status("reading both runs, analysing…"):
        refs = list(labelled_runs([reference]))
        same_input = candidate.resolve() == reference.resolve()
        cands = refs if same_input else list(labelled_runs([candidate]))  # one folder: read once
        both = [ep for _, ep in (*refs, *cands)]
        # The analysis warns of settings the files disagree on (`analyze_labelled`).
        options, _ = fill_recorded(both, options, leave_out={"reference"})
        if not fixed_design and is_sequential_run(both):
            sequential = True  # read as it was run, like every command
        try:
            result = gate_labelled(
                refs, cands, options, reference_arm, candidate_arm,
                sequential=sequential, max_tasks=max_tasks,
            )  # fmt: skip
        except NoComparison as exc:  # the cell's warnings in words
            raise no_comparison(exc) from None
        result = worded_gate(result)  # before the warnings below: the analysis' come first
        if result.family.scope == "own":  # a study's report corrects over all its comparisons
            note = family_note(recorded_comparisons(both), result.family.comparisons)
            if note is not None:
                result.warnings.append(note)
    if json_out is not None:
        out.write(rounded_json(result), json_out)
    if json_out != out.STDOUT:
        for line in gate_lines(result):
            console.print(line, highlight=False)
        for w in dict.fromkeys(result.warnings):
            console.print(f"warning: {w}", style="yellow", highlight=False)
    raise typer.Exit(result.exit_code)
