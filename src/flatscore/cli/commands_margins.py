"""`flatscore margins`: teacher-force a run's episodes through precision arms, write margins."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flatscore.cli import legacy
from flatscore.cli import options as opt
from flatscore.cli.app import app, console
from flatscore.errors import InputError


@app.command()
def margins(
    runs: Annotated[list[Path], typer.Argument(help="Canonical JSONL runs or τ² results.")],
    arms: Annotated[
        str,
        typer.Option(
            help="Arms to compare with the reference, comma-separated (in-process names such "
            "as int8,int4; NAME=URL endpoint arms are reported as unavailable)."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="Write margins.json here.")],
    model: Annotated[
        str, typer.Option(help="embedded, a .gguf file or a local HF model directory.")
    ] = "embedded",
    reference: Annotated[
        str,
        typer.Option(
            "--reference-logits",
            "--reference",
            help=f"Precision arm of the reference logits {legacy.deprecated('--reference')}.",
        ),
    ] = "ref",
    from_arm: Annotated[
        str | None,
        typer.Option(
            help="Arm label whose episodes are teacher-forced (default: highest precision)."
        ),
    ] = None,
    episodes: Annotated[
        int | None, typer.Option(min=1, help="At most this many episodes (fixed order).")
    ] = None,
    episode: Annotated[
        list[str] | None, typer.Option("--episode", help="Only these episode ids (repeatable).")
    ] = None,
    threads: Annotated[int, typer.Option(min=1, help="torch CPU threads.")] = 1,
    progress: opt.ProgressBar = True,
) -> None:
    """Flip rate by reference logit margin, margins at tool-name tokens, winning alternatives."""
    import torch

    from flatscore.analysis.outputs import rounded_json
    from flatscore.report.effect_tables import margins_table
    from flatscore.run.margins import run_margins

    for path in runs:
        if not path.exists():
            raise InputError("run not found", file=str(path))
    names = [a.strip() for a in arms.split(",") if a.strip()]
    if not names:
        raise InputError("no arms given", field="--arms")
    torch.set_num_threads(threads)
    result = run_margins(
        runs,
        names,
        model=model,
        reference=reference,
        transcripts_arm=from_arm,
        limit=episodes,
        episode_ids=episode,
        progress=progress,
    )
    out.write_text(rounded_json(result) + "\n", encoding="utf-8")
    console.print(
        f"{len(result.episodes)} episode(s) of arm {result.transcripts_arm!r}, "
        f"{result.agent_tokens} agent tokens ({result.decision_tokens} at tool names), "
        f"reference arm {result.reference_arm!r}",
        highlight=False,
    )
    console.print(margins_table(result), highlight=False, markup=False, soft_wrap=True)
    for u in result.unavailable:
        console.print(f"{u.arm}: unavailable: {u.reason}", highlight=False, markup=False)
    console.print(f"wrote {out}", style="dim")
