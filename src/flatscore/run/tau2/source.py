"""τ²-bench run live as an episode source: a study's `tau2:<domain>` domains, run by τ²'s
own orchestrator against every arm's endpoint (`runner`), planned with τ²'s tasks and
per-trial seeds (`plan`), the served models started around the run (`endpoints`).

Nothing here imports τ²-bench at module level: a study is validated without the `tau2`
extra, which only running a τ² job needs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from flatscore.episode import Episode, ErrorBudget
from flatscore.run.episode_source import ArmRun, EpisodeSource, Prepare, safe_name, seed_base
from flatscore.run.jobs import AgentRecipe, EpisodeJob
from flatscore.run.tau2.plan import RUN_SUFFIX, check_study, recipe, task_ids, tau2_seeds, tau2_spec
from flatscore.study import Study
from flatscore.study.tau2 import check_tau2_domains, is_tau2_domain, tau2_domain

if TYPE_CHECKING:
    from rich.console import Console

    from flatscore.run.tau2.endpoints import Tau2Servers


class Tau2Source(EpisodeSource):
    name = "tau2"
    plants_damage = False  # τ²'s orchestrator runs the agent: flatscore's loop never sees it

    def owns(self, domain: str) -> bool:
        return is_tau2_domain(domain)

    def check_domains(self, domains: list[str]) -> None:
        check_tau2_domains(domains, [d for d in domains if not is_tau2_domain(d)])

    def check_study(self, study: Study) -> None:
        if study.tau2 is None:
            raise ValueError("tau2:<domain> domains need a 'tau2' section (tau2.user at least)")

    def runs(self, study: Study, runs_dir: Path, run_file: Path | None) -> list[ArmRun]:
        """One run per (model, arm) in `<model>__<arm>__tau2.jsonl` (τ²'s agent plays every
        arm: no repair, no planted damage; `agent` only labels)."""
        check_study(study)
        runs = []
        for model in study.models:
            for arm_name, arm in model.arms.items():
                name = f"{safe_name(model.name)}__{safe_name(arm_name)}{RUN_SUFFIX}.jsonl"
                played = model.arms[model.played_by(arm_name)]  # a control: what it replicates
                agent = AgentRecipe(
                    label=model.name, checkpoint=played.checkpoint, control_of=arm.control_of
                )
                path = run_file or runs_dir / name
                runs.append(ArmRun(model.name, arm_name, path, agent, seed_base(study, arm)))
        return runs

    def jobs(self, study: Study, domain: str, runs: list[ArmRun], first: int) -> list[EpisodeJob]:
        """τ²'s tasks, τ²'s trial seeds (from each arm's seed base: a control arm's differ),
        τ²'s `max_steps`; the domain is τ²'s own name (the same cells as imported τ² files)."""
        seeds = {run.seed: tau2_seeds(run.seed, study.trials) for run in runs}
        budget = ErrorBudget(max_errors=study.error_budget.max_errors, counted="all")
        models = {m.name: m for m in study.models}
        jobs: list[EpisodeJob] = []
        for trial in range(study.trials):
            for task_id in task_ids(study, domain):
                for run in runs:
                    model = models[run.model]
                    index = first + len(jobs)
                    jobs.append(
                        EpisodeJob(
                            run=str(run.path),
                            study=study.name,
                            arm=run.arm,
                            domain=tau2_domain(domain),
                            task_id=task_id,
                            trial=trial,
                            seed=seeds[run.seed][trial],
                            max_steps=tau2_spec(study).max_steps,
                            error_budget=budget,
                            agent=run.recipe,
                            user=study.user,
                            source=self.name,
                            recipe=recipe(study, model, model.played_by(run.arm), index),
                        )
                    )
        return jobs

    def session(
        self, study: Study, console: Console | None
    ) -> contextlib.AbstractContextManager[Prepare | None]:
        """The served models' servers, started as the jobs about to run need them."""
        from flatscore.run.tau2.endpoints import Tau2Servers

        return _prepared(Tau2Servers(tau2_spec(study), study.output_dir, console))

    async def run(self, job: EpisodeJob) -> Episode:
        from flatscore.run.tau2.runner import run_tau2_job  # imports τ²-bench: only here

        episode = await run_tau2_job(job)
        if job.agent.control_of is not None:
            episode.metadata["control_of"] = job.agent.control_of
        return episode


@contextlib.contextmanager
def _prepared(servers: Tau2Servers) -> Iterator[Prepare]:
    with servers:
        yield servers.prepare
