"""`flatscore demo`: the whole pipeline on the embedded model, on a laptop CPU.

The embedded agent (SmolLM2-135M-Instruct + the shipped flatscore LoRA adapter) in four
precision arms — ref, int8, int4, int4-awq — on both built-in domains' test split with the
scripted user, then the report. Sized to finish in about 20 minutes on 2 cores (see
docs/benchmarks.md, "flatscore demo"): the first `DEMO_TASKS` test tasks of each domain,
one trial, two episodes at a time (one torch thread each, different arms side by side).

It is an ordinary study (`demo_study`, the same as examples/embedded.yaml with a task
limit), so a rerun resumes where it stopped and `flatscore report` rebuilds its report.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from rich.console import Console

from flatscore.console import make_console
from flatscore.study import Study
from flatscore.study_run import StudyOutcome, print_outcome, run_study

DEMO_ARMS: tuple[str, ...] = ("ref", "int8", "int4", "int4-awq")
DEMO_TASKS = 6
DEMO_CONCURRENCY = 2
DEMO_MAX_TOKENS = 192
DEMO_OUTPUT = "flatscore-demo"


def demo_study(
    output: str | Path = DEMO_OUTPUT,
    *,
    tasks_per_domain: int = DEMO_TASKS,
    arms: tuple[str, ...] = DEMO_ARMS,
    concurrency: int = DEMO_CONCURRENCY,
    model: str = "embedded",
    bootstrap: int = 5000,
    repair: str = "off",
) -> Study:
    """The demo as a study: embedded model × `arms`, both domains, test split; `repair`
    (off / on / both) adds reflective repair. The study's name does not depend on it, so
    `both` over a finished demo resumes it and runs only the `+repair` arms."""
    return Study.model_validate(
        {
            "name": "demo",
            "title": f"flatscore demo · embedded SmolLM2-135M · {', '.join(arms)}"
            + ("" if repair == "off" else f" · repair {repair}"),
            "output": str(Path(output).resolve()),
            "models": [
                {
                    "name": "smollm2-135m",
                    "kind": "embedded" if model == "embedded" else "local",
                    "path": None if model == "embedded" else model,
                    "arms": list(arms),
                    "sampling": {"max_tokens": DEMO_MAX_TOKENS},
                }
            ],
            "domains": ["retail", "telecom"],
            "split": "test",
            "tasks_per_domain": tasks_per_domain,
            "trials": 1,
            "error_budget": {"max_errors": 10, "counted": "all"},
            "user": {"kind": "scripted"},
            "concurrency": concurrency,
            "repair": repair,
            "analysis": {"bootstrap": bootstrap},
        }
    )


def run_demo(
    study: Study, *, fresh: bool = False, progress: bool = True, console: Console | None = None
) -> StudyOutcome:
    """Run (or resume) the demo study, write its report, print the verdicts."""
    console = console or make_console()
    runs = study.output_dir / "runs"
    if fresh and runs.exists():
        shutil.rmtree(runs)
    resume = runs.exists() and any(runs.glob("*.jsonl"))
    if resume:
        console.print(f"resuming the demo in {study.output_dir} (--fresh starts over)")
    outcome = run_study(study, resume=resume, progress=progress, console=console)
    print_outcome(outcome, console)
    return outcome
