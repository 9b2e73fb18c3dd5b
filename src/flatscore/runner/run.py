"""Run execution: many episodes (domains × trials × tasks), concurrently, written as each
finishes, resumable.

- **Seeds**: trial `t` uses seed `base_seed + t` for every task and every arm, so arms are
  paired on identical user behaviour.
- **Writing**: each finished episode is appended to the JSONL file and fsynced
  (`flatscore.store.EpisodeWriter`); a kill loses at most the episodes in flight.
- **Resume**: with `resume=True`, episode ids already in the file
  (`flatscore.store.finished_episode_ids`) are skipped; without it an existing non-empty file
  is refused rather than appended to.
- **Concurrency**: up to `concurrency` episodes at once (an asyncio semaphore); agents that
  wait on endpoints overlap, CPU-bound agents should use threads.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from flatscore.agents.base import Agent
from flatscore.domains import get_domain
from flatscore.episode import Episode, ErrorBudget
from flatscore.errors import InputError
from flatscore.runner.episode import EpisodeSpec, run_episode
from flatscore.store import EpisodeWriter, finished_episode_ids
from flatscore.users.base import User


class RunConfig(BaseModel):
    """What to run. Identical configs give identical episodes (timings aside)."""

    model_config = ConfigDict(extra="forbid")

    domains: list[str]
    split: Literal["train", "test", "all"] = "test"
    trials: int = Field(1, ge=1)
    seed: int = 300
    max_steps: int = Field(40, ge=1)
    max_errors: int | None = Field(30, ge=1)
    counted: Literal["all", "agent"] = "all"
    concurrency: int = Field(4, ge=1)
    study: str = "adhoc"
    arm: str = "default"
    timeout_s: float | None = None
    task_ids: list[str] | None = None


class RunSummary(BaseModel):
    planned: int
    skipped: int
    written: int
    succeeded: int
    terminations: dict[str, int]


def trial_seed(base_seed: int, trial: int) -> int:
    """The seed of trial `trial`: the same for every task and every arm."""
    return base_seed + trial


def plan_episodes(config: RunConfig) -> list[EpisodeSpec]:
    """Every (domain, trial, task) of the run, in a fixed order."""
    specs = []
    budget = ErrorBudget(max_errors=config.max_errors, counted=config.counted)
    for name in config.domains:
        domain = get_domain(name)
        tasks = domain.tasks(config.split)
        if config.task_ids is not None:
            tasks = [t for t in tasks if t.id in config.task_ids]
        for trial in range(config.trials):
            for task in tasks:
                specs.append(
                    EpisodeSpec(
                        domain=domain,
                        task=task,
                        trial=trial,
                        seed=trial_seed(config.seed, trial),
                        study=config.study,
                        arm=config.arm,
                        max_steps=config.max_steps,
                        error_budget=budget,
                        timeout_s=config.timeout_s,
                    )
                )
    return specs


async def run_async(
    config: RunConfig,
    out: str | Path,
    agent_factory: Callable[[], Agent],
    user_factory: Callable[[], User],
    *,
    resume: bool = False,
    progress: bool = True,
    on_episode: Callable[[Episode], None] | None = None,
) -> RunSummary:
    """Run every planned episode not already in `out`; append each as it finishes."""
    out = Path(out)
    if not resume and out.exists() and out.stat().st_size > 0:
        raise InputError("already exists; pass --resume to continue it", file=str(out))
    done = finished_episode_ids(out) if resume else set()
    specs = plan_episodes(config)
    todo = [s for s in specs if s.episode_id not in done]
    terminations: Counter[str] = Counter()
    succeeded = 0
    semaphore = asyncio.Semaphore(config.concurrency)
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("success {task.fields[ok]}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        disable=not progress,
    )
    with EpisodeWriter(out) as writer, bar:
        bar_id = bar.add_task(f"{config.arm} {'+'.join(config.domains)}", total=len(todo), ok=0)

        async def one(spec: EpisodeSpec) -> None:
            nonlocal succeeded
            async with semaphore:
                episode = await run_episode(spec, agent_factory(), user_factory())
            writer.write(episode)
            terminations[episode.termination_reason.value] += 1
            succeeded += episode.succeeded
            bar.update(bar_id, advance=1, ok=succeeded)
            if on_episode is not None:
                on_episode(episode)

        await asyncio.gather(*(one(spec) for spec in todo))
    return RunSummary(
        planned=len(specs),
        skipped=len(specs) - len(todo),
        written=len(todo),
        succeeded=succeeded,
        terminations=dict(terminations),
    )


def run(
    config: RunConfig,
    out: str | Path,
    agent_factory: Callable[[], Agent],
    user_factory: Callable[[], User],
    *,
    resume: bool = False,
    progress: bool = True,
) -> RunSummary:
    """Synchronous wrapper of `run_async`."""
    return asyncio.run(
        run_async(config, out, agent_factory, user_factory, resume=resume, progress=progress)
    )
