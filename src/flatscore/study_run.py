"""Run a study end to end: every cell × arm with paired seeds, resumable, then the report.

Layout of the output folder:

    <output>/runs/<model>__<arm>.jsonl   one run file per (model, arm[+repair])
    <output>/runs/<model>__<arm>__tau2.jsonl   the same for τ²-bench (`tau2:`) domains
    <output>/study.json                  the validated study, for provenance
    <output>/report.html, summary.md, analysis.json

The quick form of `flatscore run` (`flatscore.runner.quick`) is a one-model study run through
the same plan and executors, with every episode appended to its one `--out` file
(`run_file`) and no report. τ²-bench domains are jobs of the same plan (a `Tau2Recipe`
in the job: τ²'s own loop runs them, `flatscore.tau2live.runner`). There is no other way
episodes are run.

- **Pairing**: every arm of a model runs the same (domain, task, trial) list with the same
  per-trial seed (`trial_seed`: seed + trial), so arms are compared task by task.
  Jobs are queued task by task with the arms interleaved, so concurrent workers run
  different arms side by side.
- **Resume**: `resume=True` skips the episodes each run file holds a result for (a killed
  study loses at most the episodes in flight); an episode whose last attempt ended in
  `infrastructure_error` is run again, its new attempt appended (the analysis uses the
  latest: `flatscore.analysis.identity`). Without it, existing runs are refused.
- **One writer**: the executor yields finished episodes; this driver appends each to its
  run file (fsynced), whatever the executor.
- **Report**: the analysis reads exactly what `flatscore report <output>` reads (every
  `*.jsonl` under the folder), so rebuilding from logs gives the same analysis.json.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from flatscore.agents.repair import repair_arm_label
from flatscore.analysis.result import AnalysisResult
from flatscore.analysis.settings import AnalysisSettings
from flatscore.console import make_console, styled
from flatscore.console import progress as make_progress
from flatscore.domains import get_domain
from flatscore.episode import ErrorBudget, TerminationReason
from flatscore.errors import InputError, RunFailed
from flatscore.executors import make_executor
from flatscore.executors.base import AgentRecipe, EpisodeJob, Executor
from flatscore.report import ReportPaths
from flatscore.report.rebuild import rebuild
from flatscore.report.verdicts import headlines
from flatscore.store import EpisodeWriter, RunCounts, finished_episode_ids
from flatscore.study import CONTROL_SEED_OFFSET, ArmSpec, Study, study_json
from flatscore.tau2live.spec import is_tau2_domain, tau2_domain

RUNS_DIR = "runs"


@dataclass(frozen=True)
class ArmRun:
    """One run file: a model in one arm (repaired or not)."""

    model: str
    arm: str
    path: Path
    recipe: AgentRecipe
    seed: int
    """Seed of trial 0: the study's, or a control arm's own seed base."""


@dataclass(frozen=True)
class StudyPlan:
    runs: list[ArmRun]
    jobs: list[EpisodeJob]

    def cell_of(self, job: EpisodeJob) -> str:
        return f"{job.agent.label} · {job.domain}"


class StudyOutcome(RunCounts):
    """What `run_study` did."""

    output: Path
    report: ReportPaths | None = None
    analysis: AnalysisResult | None = None


def _safe(name: str) -> str:
    """A file-name-safe form of a model or arm label."""
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", name)


def study_task_ids(study: Study) -> list[str] | None:
    """The task ids the study runs in its built-in domains (None: the whole split of every
    domain; τ² domains take their tasks from the study's `tau2` section)."""
    if study.tasks_per_domain is None:
        return study.task_ids
    ids: list[str] = []
    for name in study.domains:
        if is_tau2_domain(name):
            continue
        tasks = get_domain(name).tasks(study.split)
        if study.task_ids is not None:
            tasks = [t for t in tasks if t.id in study.task_ids]
        ids.extend(t.id for t in tasks[: study.tasks_per_domain])
    return ids


def trial_seed(base_seed: int, trial: int) -> int:
    """The seed of trial `trial`: the same for every task and every arm."""
    return base_seed + trial


def seed_base(study: Study, arm: ArmSpec) -> int:
    """The seed of an arm's trial 0: the study's, or a control arm's own base (default: the
    study's + `CONTROL_SEED_OFFSET`), on built-in and τ² domains alike."""
    if arm.control_of is None:
        return study.seed
    return arm.seed_base if arm.seed_base is not None else study.seed + CONTROL_SEED_OFFSET


def _arm_runs(study: Study, runs_dir: Path, run_file: Path | None) -> list[ArmRun]:
    """One run per (model, arm[, +repair]) for the study's built-in domains."""
    runs: list[ArmRun] = []
    for model in study.models:
        for arm_name, arm in model.arms.items():
            for repaired in study.repair.levels():
                label = repair_arm_label(arm_name) if repaired else arm_name
                played = model.arms[model.played_by(arm_name)]
                recipe = AgentRecipe(
                    label=model.name,
                    agent=model.agent,
                    options=played.options,
                    backend=model.backend(arm_name, study.output_dir),
                    sampling=model.sampling,
                    repair=study.repair.config() if repaired else None,
                    checkpoint=played.checkpoint,
                    control_of=arm.control_of,
                    inject=arm.inject,
                )
                path = run_file or runs_dir / f"{_safe(model.name)}__{_safe(label)}.jsonl"
                runs.append(ArmRun(model.name, label, path, recipe, seed_base(study, arm)))
    return runs


def _tau2_runs(study: Study, runs_dir: Path, run_file: Path | None) -> list[ArmRun]:
    """One run per (model, arm) for the study's τ² domains, in `<model>__<arm>__tau2.jsonl`
    (τ²'s agent plays every arm: no repair, no planted damage; `agent` only labels)."""
    from flatscore.tau2live.plan import RUN_SUFFIX, check_study

    check_study(study)
    runs = []
    for model in study.models:
        for arm_name, arm in model.arms.items():
            name = f"{_safe(model.name)}__{_safe(arm_name)}{RUN_SUFFIX}.jsonl"
            played = model.arms[model.played_by(arm_name)]  # a control: the arm it replicates
            recipe = AgentRecipe(
                label=model.name, checkpoint=played.checkpoint, control_of=arm.control_of
            )
            path = run_file or runs_dir / name
            runs.append(ArmRun(model.name, arm_name, path, recipe, seed_base(study, arm)))
    return runs


def _builtin_jobs(study: Study, domain_name: str, runs: list[ArmRun]) -> list[EpisodeJob]:
    budget = ErrorBudget(
        max_errors=study.error_budget.max_errors, counted=study.error_budget.counted
    )
    task_ids = study_task_ids(study)
    tasks = get_domain(domain_name).tasks(study.split)
    if task_ids is not None:
        tasks = [t for t in tasks if t.id in task_ids]
    return [
        EpisodeJob(
            run=str(run.path),
            study=study.name,
            arm=run.arm,
            domain=domain_name,
            task_id=task.id,
            trial=trial,
            seed=trial_seed(run.seed, trial),
            max_steps=study.max_steps,
            error_budget=budget,
            timeout_s=study.timeout_s,
            agent=run.recipe,
            user=study.user,
        )
        for trial in range(study.trials)
        for task in tasks
        for run in runs
    ]


def _tau2_jobs(study: Study, domain_name: str, runs: list[ArmRun], first: int) -> list[EpisodeJob]:
    """The jobs of a `tau2:` domain: τ²'s tasks, τ²'s trial seeds (from each arm's seed
    base: a control arm's differ), τ²'s `max_steps`; the domain is τ²'s own name (the same
    cells as imported τ² files)."""
    from flatscore.tau2live.plan import recipe, task_ids, tau2_seeds, tau2_spec

    seeds = {run.seed: tau2_seeds(run.seed, study.trials) for run in runs}
    budget = ErrorBudget(max_errors=study.error_budget.max_errors, counted="all")
    models = {m.name: m for m in study.models}
    tasks = task_ids(study, domain_name)
    jobs: list[EpisodeJob] = []
    for trial in range(study.trials):
        for task_id in tasks:
            for run in runs:
                model = models[run.model]
                jobs.append(
                    EpisodeJob(
                        run=str(run.path),
                        study=study.name,
                        arm=run.arm,
                        domain=tau2_domain(domain_name),
                        task_id=task_id,
                        trial=trial,
                        seed=seeds[run.seed][trial],
                        max_steps=tau2_spec(study).max_steps,
                        error_budget=budget,
                        agent=run.recipe,
                        user=study.user,
                        tau2=recipe(study, model, model.played_by(run.arm), first + len(jobs)),
                    )
                )
    return jobs


def plan_study(study: Study, run_file: Path | None = None) -> StudyPlan:
    """Every run file and every episode job of the study, in paired order: (domain, trial,
    task), the arms interleaved, or (trial, domain, task) with `order: trial`. Built-in and
    τ²-bench (`tau2:`) domains alike: a τ² job carries a `Tau2Recipe` and lands in the
    arm's `__tau2` run file. With `run_file` (the quick form) every arm appends to that one
    file instead of `<output>/runs/<model>__<arm>.jsonl`."""
    runs_dir = study.output_dir / RUNS_DIR
    builtin = [d for d in study.domains if not is_tau2_domain(d)]
    runs = _arm_runs(study, runs_dir, run_file) if builtin else []
    tau2_runs = _tau2_runs(study, runs_dir, run_file) if len(builtin) < len(study.domains) else []
    paths = [r.path for r in runs + tau2_runs]
    if run_file is None and len(set(paths)) != len(paths):
        raise InputError("two arms map to the same run file name; rename one", field="models")

    jobs: list[EpisodeJob] = []
    tau2_count = 0
    for domain_name in study.domains:
        if is_tau2_domain(domain_name):
            domain_jobs = _tau2_jobs(study, domain_name, tau2_runs, tau2_count)
            tau2_count += len(domain_jobs)
        else:
            domain_jobs = _builtin_jobs(study, domain_name, runs)
        jobs.extend(domain_jobs)
    if not jobs:
        raise InputError("the study selects no tasks (check split, task_ids)", field="task_ids")
    if study.order == "trial":
        jobs.sort(key=lambda job: job.trial)  # stable: within a trial, nothing moves
    return StudyPlan(runs=runs + tau2_runs, jobs=jobs)


def analysis_options(study: Study) -> AnalysisSettings:
    """The study's analysis settings, with the prices its arms give (`model/arm`) added."""
    prices = {
        f"{m.name}/{name}": arm.price
        for m in study.models
        for name, arm in m.arms.items()
        if arm.price is not None
    }
    return study.analysis.model_copy(update={"prices": {**study.analysis.prices, **prices}})


def write_study_report(study: Study) -> tuple[AnalysisResult, ReportPaths]:
    """Analyse every run under the output folder and write the report into it."""
    out = study.output_dir
    return rebuild([out], out, analysis_options(study), title=study.report_title)


async def execute_plan(
    plan: StudyPlan,
    executor: Executor,
    *,
    resume: bool = False,
    progress: bool = True,
    console: Console | None = None,
    prepare: Callable[[list[EpisodeJob]], list[EpisodeJob]] | None = None,
) -> RunCounts:
    """Run the plan's unfinished jobs: with `resume`, every job without a result in its run
    file (never run, or its last attempt an infrastructure error). `prepare` sees the jobs
    about to run before the executor does (τ²: start the servers they need)."""
    started = time.perf_counter()
    files = list(dict.fromkeys(run.path for run in plan.runs))  # the quick form: one file
    done: dict[str, set[str]] = {}
    for path in files:
        exists = path.exists() and path.stat().st_size > 0
        if exists and not resume:
            raise InputError("already has episodes; pass --resume to continue it", file=str(path))
        done[str(path)] = finished_episode_ids(path) if resume else set()
    todo = [j for j in plan.jobs if j.episode_id not in done[j.run]]
    if prepare is not None and todo:
        todo = prepare(todo)
    per_cell_total: Counter[str] = Counter(plan.cell_of(j) for j in plan.jobs)
    per_cell_todo: Counter[str] = Counter(plan.cell_of(j) for j in todo)
    terminations: Counter[str] = Counter()
    first_error: str | None = None
    succeeded = 0
    ok: dict[str, int] = defaultdict(int)
    writers = {str(path): EpisodeWriter(path, reruns=True) for path in files}
    rerun = sum(1 for j in todo if j.episode_id in writers[j.run].attempted)
    bar = make_progress(
        console or make_console(stderr=True), "ok {task.fields[ok]}", enabled=progress
    )
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
                if first_error is None and episode.is_infrastructure_error:
                    first_error = _error_of(episode.metadata)
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
    infra = terminations[TerminationReason.INFRASTRUCTURE_ERROR.value]
    if todo and infra == len(todo):
        raise RunFailed(
            f"all {infra} episodes run ended in an infrastructure error (kept in the run "
            f"files; fix the endpoint, then --resume); the first: {first_error}"
        )
    return RunCounts(
        planned=len(plan.jobs),
        skipped=len(plan.jobs) - len(todo),
        written=len(todo),
        succeeded=succeeded,
        seconds=time.perf_counter() - started,
        terminations=dict(terminations),
        rerun=rerun,
    )


def _error_of(metadata: dict[str, object]) -> str:
    """An infrastructure error's message, as the episode loop or τ²'s runner recorded it."""
    text = metadata.get("error") or metadata.get("tau2_error") or "no message recorded"
    return " ".join(str(text).split())[:500]


def run_study(
    study: Study,
    *,
    executor: Executor | None = None,
    resume: bool = False,
    progress: bool = True,
    report: bool = True,
    console: Console | None = None,
    run_file: Path | None = None,
) -> StudyOutcome:
    """Run the study (local executor unless given or named in the study), then write the
    report into its output folder. With `run_file` (the quick form) every episode goes to
    that one file, and neither study.json nor a report is written."""
    started = time.perf_counter()
    plan = plan_study(study, run_file)
    out = run_file or study.output_dir
    if run_file is None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "study.json").write_text(study_json(study), encoding="utf-8")
    executor = executor or make_executor(study.executor, study.concurrency)
    with contextlib.ExitStack() as stack:
        prepare = None
        if any(job.tau2 is not None for job in plan.jobs):
            from flatscore.tau2live.endpoints import Tau2Servers
            from flatscore.tau2live.plan import tau2_spec

            say = console or make_console(stderr=True)
            servers = Tau2Servers(tau2_spec(study), study.output_dir, say)
            prepare = stack.enter_context(servers).prepare
        counts = asyncio.run(
            execute_plan(
                plan, executor, resume=resume, progress=progress, console=console, prepare=prepare
            )
        )
    paths = result = None
    if report and run_file is None:
        result, paths = write_study_report(study)
    seconds = time.perf_counter() - started
    return StudyOutcome(
        **counts.model_dump(exclude={"seconds"}),
        seconds=seconds,
        output=out,
        report=paths,
        analysis=result,
    )


def print_verdicts(
    analysis: AnalysisResult, paths: ReportPaths, console: Console, *, sentences: bool = True
) -> None:
    """Each cell's verdict, the headline per arm (with its first sentence), and where the
    report is: what `flatscore run study.yaml` and `flatscore report` end with. Every line
    is `Text`, so names and paths print literally on any console."""
    for cell in analysis.cells:
        console.print(
            styled((f"{cell.model} · {cell.domain}", "bold"), f": {cell.verdict}"),
            highlight=False,
        )
        for h in headlines(cell, analysis.settings.default_K):
            label = f" ({h.label})" if h.label else ""
            console.print(
                styled(f"  {h.arm} vs {h.reference}: {h.verdict}{label}"), highlight=False
            )
            if sentences and h.sentences:
                console.print(styled((f"    {h.sentences[0]}", "dim")), highlight=False)
    console.print(styled(f"report: {paths.html}"), highlight=False, soft_wrap=True)
    console.print(
        styled((f"also {paths.summary} and {paths.analysis}", "dim")),
        highlight=False,
        soft_wrap=True,
    )


def print_outcome(outcome: StudyOutcome, console: Console) -> None:
    """What ran, then (with a report) `print_verdicts`."""
    console.print(
        styled(
            f"{outcome.written} episodes run, {outcome.skipped} already there "
            f"({outcome.seconds:.0f} s); terminations {outcome.terminations}"
            + (
                f"; {outcome.rerun} run again after an infrastructure error"
                if outcome.rerun
                else ""
            )
        ),
        highlight=False,
    )
    if outcome.analysis is not None and outcome.report is not None:
        print_verdicts(outcome.analysis, outcome.report, console)
