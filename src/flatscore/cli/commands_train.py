"""`flatscore train-embedded`: reproduce the embedded agent's LoRA adapter from scratch."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flatscore.cli import legacy
from flatscore.cli import options as opt
from flatscore.cli.app import app, console, err_console


@app.command("train-embedded")
def train_embedded_command(
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Training directory (default: <cache>/train/embedded)."),
    ] = None,
    steps: Annotated[int | None, typer.Option(min=1, help="Steps (default: the recipe's).")] = None,
    recipe: Annotated[
        Path | None,
        typer.Option(
            help="A recipe file (JSON, TrainConfig fields; default: the first stage's recipe, "
            "on SmolLM2-135M-Instruct). Its base: `embedded-base` (SmolLM2, the default) or "
            "`gemma3-270m` (Gemma 3 270M, with the `gemma` extra installed)."
        ),
    ] = None,
    init: Annotated[
        Path | None,
        typer.Option(help="The adapter directory a recovery-stage recipe starts from."),
    ] = None,
    source: Annotated[
        Path | None,
        typer.Option(
            help="On-policy recipe: the adapter that plays the rollouts (default: --init)."
        ),
    ] = None,
    concurrency: Annotated[
        int, typer.Option(min=1, max=1000, help="On-policy recipe: rollout episodes in flight.")
    ] = 16,
    resume: Annotated[bool, typer.Option(help="Continue from the last checkpoint in --out.")] = (
        False
    ),
    threads: opt.TorchThreads = 1,
    checkpoint_minutes: Annotated[
        float, typer.Option(min=0.1, help="Minutes between checkpoints (resume from the last).")
    ] = 4.0,
    install: Annotated[
        bool, typer.Option(help="Copy the finished adapter into the package (the default model).")
    ] = False,
    progress: opt.ProgressBar = True,
) -> None:
    """Fine-tune the recipe's base (SmolLM2-135M-Instruct or Gemma 3 270M; LoRA, CPU) on oracle
    episodes of the train split, or on the agent's own failed states (an on-policy recipe)."""
    from flatscore.cli.progress_text import training_step
    from flatscore.models.adapter import ADAPTER_DIR
    from flatscore.models.embedded import cache_dir
    from flatscore.train.recipe import load_recipe
    from flatscore.train.train import RunOptions, train

    options = opt.model_from(RunOptions, locals())  # the flags named as its fields
    target = out or cache_dir() / "train" / "embedded"
    config = load_recipe(recipe)
    if steps is not None:
        config = config.model_copy(update={"steps": steps})
    adapter = train(
        config,
        target,
        resume=resume,
        options=options,
        on_step=lambda s: err_console.print(training_step(s), highlight=False),
    )
    if adapter is None:
        console.print(f"stopped early; continue with --resume --out {target}")
        return
    console.print(f"adapter: {adapter}")
    if install:
        from flatscore.train.card import install_adapter

        install_adapter(adapter, ADAPTER_DIR)
        console.print(f"installed into {ADAPTER_DIR}")


@app.command("eval-embedded")
def eval_embedded_command(
    out: Annotated[
        Path, typer.Option("--out", help="Directory for <arm>.jsonl + summary.json.")
    ] = (Path("runs/embedded-eval")),
    arm: Annotated[
        list[str] | None,
        typer.Option("--arm", help="Arm (repeatable; default: ref int8 int4 int4-awq int3)."),
    ] = None,
    limit: Annotated[
        int | None, typer.Option(min=1, help="Only the first N test tasks of each domain.")
    ] = None,
    stride: Annotated[
        int, typer.Option(min=1, help="Only every N-th test task of each domain (a spread sample).")
    ] = 1,
    adapter: Annotated[
        Path | None,
        typer.Option(
            help="Adapter directory to merge instead of the shipped one "
            "(e.g. a training checkpoint)."
        ),
    ] = None,
    threads: opt.TorchThreads = 1,
    concurrency: Annotated[
        int,
        typer.Option(
            min=1,
            max=1000,
            help="Episodes in flight, decoded together (results do not depend on it).",
        ),
    ] = 16,
    progress: opt.ProgressBar = True,
) -> None:
    """Evaluate the embedded agent: test split, both domains, scripted user, greedy, per arm."""
    import json
    import os

    import torch

    from flatscore.cli.embedded_card_runs import eval_table
    from flatscore.domains import get_domain
    from flatscore.models.adapter import ADAPTER_ENV, shipped_adapter
    from flatscore.train.evaluate import EVAL_ARMS, EVAL_DOMAINS, run_arm, summarize

    torch.set_num_threads(threads)
    if adapter is not None:
        os.environ[ADAPTER_ENV] = str(adapter)
    used = shipped_adapter()
    task_ids = None
    if limit is not None or stride > 1:
        task_ids = [
            t.id for d in EVAL_DOMAINS for t in get_domain(d).tasks("test")[::stride][:limit]
        ]
    summaries = []
    for name in arm or list(EVAL_ARMS):
        path = run_arm(
            name,
            out,
            task_ids=task_ids,
            progress=progress,
            threads=threads,
            concurrency=concurrency,
        )
        summaries += summarize(path)
        ordinal = {2: "2nd", 3: "3rd"}.get(stride, f"{stride}th")
        sample = f"every {ordinal} test task" if stride > 1 else "test tasks"
        if limit:
            scope = f"first {limit} of the {sample} per domain"
        else:
            scope = f"{sample} per domain" if stride > 1 else "all test tasks per domain"
        scope += f"; adapter {used}" if used else "; no adapter (base model)"
        (out / "summary.json").write_text(
            json.dumps(
                {
                    "meta": {
                        "scope": scope,
                        "limit": limit,
                        "adapter": str(used) if used else None,
                    },
                    "summaries": [s.model_dump() for s in summaries],
                },
                indent=2,
            )
        )
    console.print(eval_table(summaries), highlight=False, soft_wrap=True)


@app.command("embedded-card")
def embedded_card_command(
    train_dir: Annotated[
        Path, typer.Option("--train", help="Training directory of the card's adapter.")
    ],
    eval_dir: Annotated[Path | None, typer.Option("--eval", help="eval-embedded --out.")] = None,
    target: Annotated[
        Path | None,
        typer.Option("--out", help="Card path (default: the package's adapter/MODEL_CARD.md)."),
    ] = None,
    note: Annotated[str, typer.Option(help="A line quoted at the top of the card.")] = "",
    repro_train: Annotated[
        Path | None,
        typer.Option(help="Training directory of a from-scratch rerun, compared with the card's."),
    ] = None,
    repro_eval: Annotated[
        Path | None, typer.Option(help="eval-embedded --out of the rerun's adapter.")
    ] = None,
    init_train: Annotated[
        list[Path] | None,
        typer.Option(
            help="Training directory of a stage --train started from (its recipe pins "
            "that adapter's sha256); repeatable for a longer chain, the first stage first."
        ),
    ] = None,
    eval_runs: Annotated[
        Path | None,
        typer.Option(help="Folder of `flatscore run` files of the adapter (<model>__<arm>.jsonl)."),
    ] = None,
    eval_study: Annotated[
        Path | None, typer.Option(help="The study file the --eval-runs came from (its scope).")
    ] = None,
) -> None:
    """Write the embedded adapter's model card from the training and evaluation files."""
    from flatscore.cli.embedded_card import write_card
    from flatscore.errors import InputError
    from flatscore.models.adapter import ADAPTER_DIR

    if not (train_dir / "config.json").is_file():
        raise InputError("is not a training directory (no config.json)", file=str(train_dir))
    if eval_study is not None and eval_runs is None:
        raise InputError("needs --eval-runs (the run files it describes)", field="--eval-study")
    if repro_train is not None and not (repro_train / "loss.jsonl").is_file():
        raise InputError("is not a training directory (no loss.jsonl)", file=str(repro_train))
    path = write_card(
        train_dir,
        eval_dir,
        target or ADAPTER_DIR / "MODEL_CARD.md",
        note=note,
        adapter_dir=ADAPTER_DIR if target is None else None,  # the package's card: its adapter
        repro_train=repro_train,
        repro_eval=repro_eval,
        init_train=init_train,
        eval_runs=eval_runs,
        eval_study=eval_study,
    )
    console.print(f"wrote {path}")


@app.command("embedded-round")
def embedded_round_command(
    runs: Annotated[
        list[Path], typer.Argument(help="Run files or folders of them (a study's runs/).")
    ],
    reference: Annotated[
        str,
        typer.Option(
            "--reference",
            "--arm",
            help=f"{opt.REFERENCE_HELP} {legacy.deprecated('--arm')}.",
        ),
    ] = "ref",
    trials: opt.Trials = None,
) -> None:
    """An on-policy round's numbers for the reference on the test set, against the targets."""
    from flatscore.cli.embedded_round import round_table
    from flatscore.train.rounds import round_rows

    lines = round_table(round_rows(runs, reference, trials))
    console.print("\n".join(lines), highlight=False, soft_wrap=True)
