"""Run a study end to end: every cell × arm with paired seeds, resumable, then the report.

Layout of the output folder:

    <output>/runs/<model>__<arm>.jsonl   one run file per (model, arm[+repair])
    <output>/study.json                  the validated study, for provenance
    <output>/report.html, summary.md, analysis.json

- **Pairing**: every arm of a model runs the same (domain, task, trial) list with the same
  per-trial seed (`flatscore.runner.run.trial_seed`), so arms are compared task by task.
  Jobs are queued task by task with the arms interleaved, so concurrent workers run
  different arms side by side.
- **Resume**: `resume=True` skips the episode ids already in each run file (a killed study
  loses at most the episodes in flight); without it, existing runs are refused.
- **One writer**: the executor yields finished episodes; this driver appends each to its
  run file (fsynced), whatever the executor.
- **Report**: the analysis reads exactly what `flatscore report <output>` reads (every
  `*.jsonl` under the folder), so rebuilding from logs gives the same analysis.json.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from flatscore.analysis.analyze import AnalysisOptions, AnalysisSettings
from flatscore.analysis.result import AnalysisResult
from flatscore.errors import InputError
from flatscore.executors.base import AgentRecipe, EpisodeJob, Executor, RepairRecipe
from flatscore.report import ReportPaths
from flatscore.runner.run import RunConfig, plan_episodes
from flatscore.store import EpisodeWriter, finished_episode_ids
from flatscore.study import Study

RUNS_DIR = "runs"


@dataclass(frozen=True)
class ArmRun:
    """One run file: a model in one arm (repaired or not)."""

    model: str
    arm: str
    path: Path
    recipe: AgentRecipe


@dataclass(frozen=True)
class StudyPlan:
    runs: list[ArmRun]
    jobs: list[EpisodeJob]

    def cell_of(self, job: EpisodeJob) -> str:
        return f"{job.agent.label} · {job.domain}"


class StudyOutcome(BaseModel):
    """What `run_study` did."""

    planned: int
    skipped: int
    written: int
    succeeded: int
    seconds: float
    terminations: dict[str, int]
    output: Path
    report: ReportPaths | None = None
    analysis: AnalysisResult | None = None


def _safe(name: str) -> str:
    """A file-name-safe form of a model or arm label."""
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", name)


def study_task_ids(study: Study) -> list[str] | None:
    """The task ids the study runs (None: the whole split of every domain)."""
    if study.tasks_per_domain is None:
        return study.task_ids
    from flatscore.domains import get_domain

    ids: list[str] = []
    for name in study.domains:
        tasks = get_domain(name).tasks(study.split)
        if study.task_ids is not None:
            tasks = [t for t in tasks if t.id in study.task_ids]
        ids.extend(t.id for t in tasks[: study.tasks_per_domain])
    return ids


def plan_study(study: Study) -> StudyPlan:
    """Every run file and every episode job of the study, in paired order."""
    from flatscore.agents.repair import repair_arm_label

    runs_dir = study.output_dir / RUNS_DIR
    runs: list[ArmRun] = []
    for model in study.models:
        for arm_name, arm in model.arms.items():
            for repaired in study.repair.levels():
                label = repair_arm_label(arm_name) if repaired else arm_name
                recipe = AgentRecipe(
                    label=model.name,
                    agent=model.agent,
                    options=arm.options,
                    backend=model.backend(arm_name, study.output_dir),
                    sampling=model.sampling,
                    repair=RepairRecipe(
                        channels=study.repair.channels, attempts=study.repair.attempts
                    )
                    if repaired
                    else None,
                    checkpoint=arm.checkpoint,
                )
                path = runs_dir / f"{_safe(model.name)}__{_safe(label)}.jsonl"
                runs.append(ArmRun(model.name, label, path, recipe))
    paths = [r.path for r in runs]
    if len(set(paths)) != len(paths):
        raise InputError("two arms map to the same run file name; rename one", field="models")

    config = RunConfig(
        domains=study.domains,
        split=study.split,
        trials=study.trials,
        seed=study.seed,
        max_steps=study.max_steps,
        max_errors=study.error_budget.max_errors,
        counted=study.error_budget.counted,
        study=study.name,
        timeout_s=study.timeout_s,
        task_ids=study_task_ids(study),
    )
    specs = plan_episodes(config)
    if not specs:
        raise InputError("the study selects no tasks (check split, task_ids)", field="task_ids")
    jobs = [
        EpisodeJob(
            run=str(run.path),
            study=study.name,
            arm=run.arm,
            domain=spec.domain.name,
            task_id=spec.task.id,
            trial=spec.trial,
            seed=spec.seed,
            max_steps=spec.max_steps,
            error_budget=spec.error_budget,
            timeout_s=spec.timeout_s,
            agent=run.recipe,
            user=study.user,
        )
        for spec in specs
        for run in runs
    ]
    return StudyPlan(runs=runs, jobs=jobs)


def analysis_options(study: Study) -> AnalysisOptions:
    """The study's analysis settings as `flatscore analyze` options."""
    from flatscore.analysis.budget import parse_budgets
    from flatscore.analysis.channels import load_rules

    a = study.analysis
    budgets = parse_budgets(a.budgets) if isinstance(a.budgets, str) else a.budgets
    rules_path = None
    if a.channel_rules is not None:
        rules_path = Path(a.channel_rules).expanduser()
        if not rules_path.is_absolute():
            rules_path = (study.base_dir / rules_path).resolve()
    settings = AnalysisSettings.from_points(
        reference=a.reference,
        budgets=budgets,
        count=a.count,
        tost_margin=a.tost_margin,
        bootstrap=a.bootstrap,
        seed=a.seed,
        correction=a.correction,
    )
    return AnalysisOptions(**settings.model_dump(), rules=load_rules(rules_path))


def write_study_report(study: Study) -> tuple[AnalysisResult, ReportPaths]:
    """Analyse every run under the output folder and write the report into it."""
    from flatscore.report.rebuild import rebuild

    out = study.output_dir
    return rebuild([out], out, analysis_options(study), title=study.report_title)


def _progress(console: Console, enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("ok {task.fields[ok]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=console,
        disable=not enabled,
    )


async def execute_plan(
    plan: StudyPlan,
    executor: Executor,
    *,
    resume: bool = False,
    progress: bool = True,
    console: Console | None = None,
) -> tuple[int, int, int, Counter[str]]:
    """Run the plan's unfinished jobs; returns (planned, skipped, succeeded, terminations)."""
    done: dict[str, set[str]] = {}
    for run in plan.runs:
        exists = run.path.exists() and run.path.stat().st_size > 0
        if exists and not resume:
            raise InputError(
                "the study's output already has runs; pass --resume to continue it",
                file=str(run.path),
            )
        done[str(run.path)] = finished_episode_ids(run.path) if resume else set()
    todo = [j for j in plan.jobs if j.episode_id not in done[j.run]]
    per_cell_total: Counter[str] = Counter(plan.cell_of(j) for j in plan.jobs)
    per_cell_todo: Counter[str] = Counter(plan.cell_of(j) for j in todo)
    terminations: Counter[str] = Counter()
    succeeded = 0
    ok: dict[str, int] = defaultdict(int)
    writers = {str(r.path): EpisodeWriter(r.path) for r in plan.runs}
    bar = _progress(console or Console(stderr=True), progress)
    try:
        with bar:
            overall = bar.add_task("all cells", total=len(plan.jobs), ok=0)
            bar.update(overall, completed=len(plan.jobs) - len(todo))
            ids = {}
            for cell, total in per_cell_total.items():
                ids[cell] = bar.add_task(cell, total=total, ok=0)
                bar.update(ids[cell], completed=total - per_cell_todo[cell])
            by_id = {j.episode_id: j for j in todo}
            async for episode in executor.map(todo):
                job = by_id[episode.episode_id]
                writers[job.run].write(episode)
                terminations[episode.termination_reason.value] += 1
                cell = plan.cell_of(job)
                if episode.succeeded:
                    succeeded += 1
                    ok[cell] += 1
                bar.update(ids[cell], advance=1, ok=ok[cell])
                bar.update(overall, advance=1, ok=succeeded)
    finally:
        for writer in writers.values():
            writer.close()
        executor.close()
    return len(plan.jobs), len(plan.jobs) - len(todo), succeeded, terminations


def run_study(
    study: Study,
    *,
    executor: Executor | None = None,
    resume: bool = False,
    progress: bool = True,
    report: bool = True,
    console: Console | None = None,
) -> StudyOutcome:
    """Run the study (local executor unless given or named in the study), then write the
    report into its output folder."""
    from flatscore.executors import make_executor

    plan = plan_study(study)
    out = study.output_dir
    out.mkdir(parents=True, exist_ok=True)
    (out / "study.json").write_text(study.model_dump_json(indent=2) + "\n", encoding="utf-8")
    executor = executor or make_executor(study.executor, study.concurrency)
    started = time.perf_counter()
    planned, skipped, succeeded, terminations = asyncio.run(
        execute_plan(plan, executor, resume=resume, progress=progress, console=console)
    )
    paths = result = None
    if report:
        result, paths = write_study_report(study)
    return StudyOutcome(
        planned=planned,
        skipped=skipped,
        written=planned - skipped,
        succeeded=succeeded,
        seconds=time.perf_counter() - started,
        terminations=dict(terminations),
        output=out,
        report=paths,
        analysis=result,
    )


def print_outcome(outcome: StudyOutcome, console: Console) -> None:
    """What ran, each cell's verdict with its headline per arm, and where the report is."""
    from rich.markup import escape as esc

    from flatscore.report.verdicts import headlines

    console.print(
        f"{outcome.written} episodes run, {outcome.skipped} already there "
        f"({outcome.seconds:.0f} s); terminations {outcome.terminations}",
        highlight=False,
    )
    if outcome.analysis is None or outcome.report is None:
        return
    default_k = outcome.analysis.settings.default_K
    for cell in outcome.analysis.cells:
        console.print(
            f"[bold]{esc(cell.model)} · {esc(cell.domain)}[/]: {cell.verdict}", highlight=False
        )
        for h in headlines(cell, default_k):
            console.print(f"  {esc(h.arm)} vs {esc(h.reference)}: {h.verdict}", highlight=False)
            if h.sentences:
                console.print(f"    [dim]{esc(h.sentences[0])}[/]", highlight=False)
    console.print(f"report: {esc(str(outcome.report.html))}", highlight=False, soft_wrap=True)
    console.print(
        f"[dim]also {esc(str(outcome.report.summary))} and {esc(str(outcome.report.analysis))}[/]",
        highlight=False,
        soft_wrap=True,
    )
