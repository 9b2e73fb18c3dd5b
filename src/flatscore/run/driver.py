"""Run a study end to end: every cell × arm with paired seeds, resumable, then the report.

Layout of the output folder:

    <output>/runs/<model>__<arm>.jsonl   one run file per (model, arm[+repair])
    <output>/runs/<model>__<arm>__tau2.jsonl   the same for τ²-bench domains
    <output>/study.json                  the validated study, for provenance
    <output>/report.html, summary.md, analysis.json

The quick form of `flatscore run` (`flatscore.run.quick`) is a one-model study run through
the same plan and executors, with every episode appended to its one `--out` file
(`run_file`) and no report. Each domain's episode source (`flatscore.run.sources`) plans
its jobs into the same plan: the built-in domains through flatscore's episode loop,
τ²-bench's through τ²'s own orchestrator (`flatscore.run.tau2`). There is no other way
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
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from flatscore.analysis.recorded import RECORD_KEY, study_record
from flatscore.analysis.result import AnalysisResult
from flatscore.analysis.settings import AnalysisSettings
from flatscore.console import make_console, styled
from flatscore.errors import InputError
from flatscore.report import ReportPaths
from flatscore.report.rebuild import rebuild
from flatscore.report.run_text import outcome_line
from flatscore.report.terminal import print_verdicts
from flatscore.run.episode_source import ArmRun, EpisodeSource, Prepare
from flatscore.run.executors import make_executor
from flatscore.run.executors.base import Executor
from flatscore.run.jobs import EpisodeJob
from flatscore.run.look_ahead import run_looks
from flatscore.run.recorder import Recorder
from flatscore.run.sequential import SequentialPlan, planned_looks, printer, report_state
from flatscore.run.sources import SOURCES, source_of
from flatscore.run.study_servers import StudyServers, needs_server
from flatscore.store.jsonl import RunCounts, finished_episode_ids
from flatscore.study import Study, study_json

RUNS_DIR = "runs"


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


def plan_study(study: Study, run_file: Path | None = None) -> StudyPlan:
    """Every run file and every episode job of the study, in paired order: (domain, trial,
    task), the arms interleaved, or (trial, domain, task) with `order: trial`. Each domain's
    source (`flatscore.run.sources`: built-in or τ²-bench) plans its run files and jobs. With
    `run_file` (the quick form) every arm appends to that one file instead of
    `<output>/runs/<model>__<arm>.jsonl`."""
    runs_dir = study.output_dir / RUNS_DIR
    owners = {domain: _owner(domain) for domain in study.domains}
    used = list({s.name: s for s in owners.values()}.values())
    runs = {s.name: s.runs(study, runs_dir, run_file) for s in used}
    every_run = [r for s in used for r in runs[s.name]]
    paths = [r.path for r in every_run]
    if run_file is None and len(set(paths)) != len(paths):
        raise InputError("two arms map to the same run file name; rename one", field="models")

    jobs: list[EpisodeJob] = []
    planned: Counter[str] = Counter()
    for domain_name, source in owners.items():
        domain_jobs = source.jobs(study, domain_name, runs[source.name], planned[source.name])
        planned[source.name] += len(domain_jobs)
        jobs.extend(domain_jobs)
    if not jobs:
        raise InputError("the study selects no tasks (check split, task_ids)", field="task_ids")
    if study.order == "trial":
        jobs.sort(key=lambda job: job.trial)  # stable: within a trial, nothing moves
    return StudyPlan(runs=every_run, jobs=jobs)


def _owner(domain: str) -> EpisodeSource:
    source = source_of(domain)
    if source is None:  # the study's checks refused unknown names
        raise InputError(f"no episode source runs domain {domain!r}", field="domains")
    return source


def analysis_options(study: Study) -> AnalysisSettings:
    """The study's analysis settings, with the prices its arms give (`model/arm`) added."""
    prices = {
        f"{m.name}/{name}": arm.price
        for m in study.models
        for name, arm in m.arms.items()
        if arm.price is not None
    }
    sequential = study.analysis.sequential or study.stopping == "sequential"
    return study.analysis.model_copy(
        update={"prices": {**study.analysis.prices, **prices}, "sequential": sequential}
    )


def study_metadata(study: Study) -> dict[str, object]:
    """What every episode of the study records of its analysis settings, so that its run
    files are read as the study file says (`flatscore.analysis.recorded`)."""
    comparisons = sum((len(m.arms) - 1) * len(study.domains) for m in study.models)
    return {RECORD_KEY: study_record(study.analysis, comparisons)}


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
    metadata: dict[str, object] | None = None,
) -> RunCounts:
    """Run the plan's unfinished jobs: with `resume`, every job without a result in its run
    file (never run, or its last attempt an infrastructure error). `prepare` sees the jobs
    about to run before the executor does (τ²: start the servers they need)."""
    done = finished_in(plan, resume)
    todo = [j for j in plan.jobs if j.episode_id not in done[j.run]]
    if prepare is not None and todo:
        todo = prepare(todo)
    files = list(dict.fromkeys(run.path for run in plan.runs))
    console = console or make_console(stderr=True)
    recorder = Recorder(files, plan.cell_of, console, progress=progress, metadata=metadata)
    try:
        with recorder:
            recorder.plan(plan.jobs, finished={i for ids in done.values() for i in ids})
            rerun = sum(1 for j in todo if recorder.attempted(j))
            by_id = {j.episode_id: j for j in todo}
            async for episode in executor.map(todo):
                recorder.write(by_id[episode.episode_id], episode)
    finally:
        executor.close()
    return recorder.counts(len(plan.jobs), len(plan.jobs) - len(todo), rerun)


def finished_in(plan: StudyPlan, resume: bool) -> dict[str, set[str]]:
    """Each run file's episode ids with a result (empty without `resume`); a run file with
    episodes and no `resume` is refused."""
    done: dict[str, set[str]] = {}
    for path in dict.fromkeys(run.path for run in plan.runs):  # the quick form: one file
        exists = path.exists() and path.stat().st_size > 0
        if exists and not resume:
            raise InputError("already has episodes; pass --resume to continue it", file=str(path))
        done[str(path)] = finished_episode_ids(path) if resume else set()
    return done


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
        say = console or make_console(stderr=True)
        prepares = [
            stack.enter_context(SOURCES.make(name).session(study, say))
            for name in dict.fromkeys(job.source for job in plan.jobs)
        ]
        # `server:` arms: their servers up before any episode runs (flatscore.run.study_servers)
        servers = stack.enter_context(StudyServers(out if run_file is None else out.parent, say))
        if any(needs_server(job) for job in plan.jobs):
            done = finished_in(plan, resume)
            servers.start([j for j in plan.jobs if j.episode_id not in done[j.run]])
            prepares.insert(0, servers.prepare)
        prepare = _chained([p for p in prepares if p is not None])
        if study.stopping == "sequential":
            counts = run_sequential(
                plan, executor, study, resume=resume, progress=progress, say=say, prepare=prepare
            )
        else:
            counts = asyncio.run(
                execute_plan(
                    plan,
                    executor,
                    resume=resume,
                    progress=progress,
                    console=console,
                    prepare=prepare,
                    metadata=study_metadata(study),
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


def run_sequential(
    plan: StudyPlan,
    executor: Executor,
    study: Study,
    *,
    resume: bool,
    progress: bool,
    say: Console,
    prepare: Prepare | None,
) -> RunCounts:
    """The plan look by look, looking ahead (`flatscore.run.look_ahead`); `planned` is the
    fixed design's."""
    options = analysis_options(study)
    seq = SequentialPlan(plan.jobs, study.seed, planned_looks(options))
    files = list(dict.fromkeys(run.path for run in plan.runs))
    say_line = printer(say)
    done = finished_in(plan, resume)
    recorder = Recorder(files, plan.cell_of, say, progress=progress, metadata=study_metadata(study))
    try:
        with recorder:
            counts = asyncio.run(
                run_looks(
                    seq,
                    executor,
                    recorder,
                    finished={i for ids in done.values() for i in ids},
                    read_look=lambda k: seq.look(k, files, options),
                    prepare=prepare,
                    say=say_line,
                )
            )
    finally:
        executor.close()
    report_state(seq, say_line)
    return counts.model_copy(update={"planned": len(plan.jobs)})


def _chained(prepares: list[Prepare]) -> Prepare | None:
    """One `prepare` that runs each source's in turn (None when no source has one)."""
    if not prepares:
        return None

    def prepare(jobs: list[EpisodeJob]) -> list[EpisodeJob]:
        for step in prepares:
            jobs = step(jobs)
        return jobs

    return prepare


def print_outcome(outcome: StudyOutcome, console: Console) -> None:
    """What ran, then (with a report) `print_verdicts`."""
    line = outcome_line(
        outcome.written, outcome.skipped, outcome.seconds, outcome.terminations, outcome.rerun
    )
    console.print(styled(line), highlight=False)
    if outcome.analysis is not None and outcome.report is not None:
        print_verdicts(outcome.analysis, outcome.report, console)
