"""`flatscore demo --fresh`: the whole pipeline on the embedded model, on a laptop CPU.

(`flatscore demo` without `--fresh` reproduces a slice of study v2 instead:
`flatscore.run.reproduce`.)

The embedded agent (SmolLM2-135M-Instruct + the shipped flatscore LoRA adapter) in three
precision arms — ref, int8 and int4-awq (a flat arm and a damaged one beside the
reference) — on both built-in domains' test split with the scripted user, then the report.
Sized for a laptop: ≤ 4 GB resident and ≤ 20 minutes on 2 cores from a fresh clone
(measured 19 min 55 s, peak 3,746,020 kB, fp32: docs/benchmarks.md, "flatscore demo"):
three fp32 arms' weights and KV budgets fit where four did not, and 20 minutes hold
`DEMO_TASKS` test tasks per domain (what that size can and cannot show is pinned in
tests/analysis/test_demo_sized.py), taken round-robin over the task templates
(`stratified_task_ids`) so every kind of task is in, one trial, `DEMO_CONCURRENCY` episodes
in flight (each arm batches its episodes in one forward pass per step; one torch thread per
arm, the arms side by side on the cores).

It is an ordinary study (`demo_study`, the same as examples/embedded.yaml with a task
limit), so a rerun resumes where it stopped and `flatscore report` rebuilds its report.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from rich.console import Console

from flatscore import defaults
from flatscore.console import make_console
from flatscore.errors import InputError
from flatscore.report.demo_text import demo_title, interrupted, resuming_demo
from flatscore.run.driver import StudyOutcome, print_outcome, run_study
from flatscore.study import Study, study_from_json

DEMO_ARMS: tuple[str, ...] = ("ref", "int8", "int4-awq")
DEMO_TASKS = 9
DEMO_CONCURRENCY = 64
DEMO_MAX_TOKENS = 192
DEMO_OUTPUT = "flatscore-demo"
DEMO_DOMAINS = ["retail", "telecom"]
# Per arm. Runtime + 3 arms' weights + 3 budgets = 2.8 GiB before activations; at 320 MiB
# per arm the 3-arm demo peaked at 3,935,472 kB, just over 4 GB (docs/benchmarks.md).
DEMO_KV_MEMORY_MB = 256.0


def stratified_task_ids(domains: list[str], split: str, per_domain: int) -> list[str]:
    """`per_domain` tasks of each domain's split, round-robin over the task templates in
    the order they first appear (the first task of every template, then the second, ...).
    A stable rule: it depends only on the split's task order and each task's `template`.
    The first tasks of a split are often one template (telecom's first 6 test tasks need
    no agent tool call), which would leave whole channels unmeasured."""
    from flatscore.domains import get_domain

    ids: list[str] = []
    for name in domains:
        by_template: dict[str, list[str]] = {}
        for task in get_domain(name).tasks(split):
            by_template.setdefault(task.template, []).append(task.id)
        queues = list(by_template.values())
        picked: list[str] = []
        depth = 0
        while len(picked) < per_domain and any(depth < len(q) for q in queues):
            picked.extend(q[depth] for q in queues if depth < len(q))
            depth += 1
        ids.extend(picked[:per_domain])
    return ids


def demo_study(
    output: str | Path = DEMO_OUTPUT,
    *,
    tasks_per_domain: int = DEMO_TASKS,
    arms: tuple[str, ...] = DEMO_ARMS,
    concurrency: int = DEMO_CONCURRENCY,
    model: str = "embedded",
    bootstrap: int = defaults.BOOTSTRAP,
    repair: str = "off",
    compute: str = "fp32",
    planted: tuple[float, float] | None = None,
) -> Study:
    """The demo as a study: embedded model × `arms`, both domains, test split; `repair`
    (off / on / both) adds reflective repair. The study's name does not depend on it, so
    `both` over a finished demo resumes it and runs only the `+repair` arms. `planted`
    (role confusion, dropped argument rates) adds a positive control: the arm `<first
    arm>-planted`, the first arm with that damage injected (docs/arms.md)."""
    arm_specs: dict[str, dict[str, object]] = {a: {} for a in arms}
    if planted is not None and arms:
        arm_specs[f"{arms[0]}-planted"] = {
            "inject": {"base": arms[0], "role_confusion": planted[0], "drop_argument": planted[1]}
        }
    return Study.model_validate(
        {
            "name": "demo",
            "title": demo_title(arms, compute, repair),
            "output": str(Path(output).resolve()),
            "models": [
                {
                    "name": "smollm2-135m",
                    "kind": "embedded" if model == "embedded" else "local",
                    "path": None if model == "embedded" else model,
                    "arms": arm_specs,
                    "sampling": {"max_tokens": DEMO_MAX_TOKENS},
                    "compute": compute,
                    "kv_memory_mb": DEMO_KV_MEMORY_MB,
                }
            ],
            "domains": list(DEMO_DOMAINS),
            "split": "test",
            "task_ids": stratified_task_ids(DEMO_DOMAINS, "test", tasks_per_domain),
            "trials": 1,
            "error_budget": {"max_errors": 10, "counted": "all"},
            "user": {"kind": "scripted"},
            "concurrency": concurrency,
            "repair": repair,
            "analysis": {"bootstrap": bootstrap},
        }
    )


def _compute_of(study: Study) -> str:
    return study.models[0].compute or "fp32"


def _check_same_compute(study: Study) -> None:
    """A demo resumed in another compute setting would mix two kinds of numbers in one
    arm: refused, naming both settings."""
    recorded = study.output_dir / "study.json"
    if not recorded.is_file():
        return
    try:
        before = study_from_json(recorded.read_text(encoding="utf-8"))
    except ValueError:
        return  # not ours to judge: the run files decide what resumes
    if _compute_of(before) != _compute_of(study):
        raise InputError(
            f"this demo was run with compute {_compute_of(before)}, "
            f"not {_compute_of(study)}: pass --compute {_compute_of(before)} to resume it, "
            f"or delete {study.output_dir / 'runs'} to start over",
            file=str(recorded),
            field="compute",
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
        _check_same_compute(study)
        console.print(resuming_demo(study.output_dir, runs))
    try:
        outcome = run_study(study, resume=resume, progress=progress, console=console)
    except KeyboardInterrupt:  # finished episodes are on disk (each fsynced as it ends)
        console.print(interrupted(runs))
        raise
    print_outcome(outcome, console)
    return outcome
