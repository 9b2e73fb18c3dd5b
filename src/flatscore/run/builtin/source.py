"""The built-in domains as an episode source: flatscore's own episode loop over
`flatscore.domains` (retail, telecom), with every agent kind, reflective repair and planted
damage. Trial t of every task and arm uses seed `trial_seed(base, t)`."""

from __future__ import annotations

from pathlib import Path

from flatscore.agents.repair import repair_arm_label
from flatscore.domains import domain_names, get_domain
from flatscore.episode import Episode, ErrorBudget
from flatscore.run.arm_backend import arm_backend
from flatscore.run.builtin.job import run_builtin_job
from flatscore.run.episode_source import (
    BUILTIN,
    ArmRun,
    EpisodeSource,
    safe_name,
    seed_base,
    trial_seed,
)
from flatscore.run.jobs import AgentRecipe, EpisodeJob
from flatscore.study import Study


def study_task_ids(study: Study) -> list[str] | None:
    """The task ids the study runs in its built-in domains (None: the whole split of every
    domain; other sources choose their own tasks)."""
    if study.tasks_per_domain is None:
        return study.task_ids
    ids: list[str] = []
    for name in study.domains:
        if name not in domain_names():
            continue
        tasks = get_domain(name).tasks(study.split)
        if study.task_ids is not None:
            tasks = [t for t in tasks if t.id in study.task_ids]
        ids.extend(t.id for t in tasks[: study.tasks_per_domain])
    return ids


class BuiltinSource(EpisodeSource):
    name = BUILTIN

    def owns(self, domain: str) -> bool:
        return domain in domain_names()

    def runs(self, study: Study, runs_dir: Path, run_file: Path | None) -> list[ArmRun]:
        """One run per (model, arm[, +repair]): `<model>__<arm>.jsonl`."""
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
                        backend=arm_backend(model, arm_name, study.output_dir),
                        sampling=model.sampling,
                        repair=study.repair.config() if repaired else None,
                        checkpoint=played.checkpoint,
                        control_of=arm.control_of,
                        inject=arm.inject,
                    )
                    name = f"{safe_name(model.name)}__{safe_name(label)}.jsonl"
                    path = run_file or runs_dir / name
                    runs.append(ArmRun(model.name, label, path, recipe, seed_base(study, arm)))
        return runs

    def jobs(self, study: Study, domain: str, runs: list[ArmRun], first: int) -> list[EpisodeJob]:
        budget = ErrorBudget(
            max_errors=study.error_budget.max_errors, counted=study.error_budget.counted
        )
        task_ids = study_task_ids(study)
        tasks = get_domain(domain).tasks(study.split)
        if task_ids is not None:
            tasks = [t for t in tasks if t.id in task_ids]
        return [
            EpisodeJob(
                run=str(run.path),
                study=study.name,
                arm=run.arm,
                domain=domain,
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

    async def run(self, job: EpisodeJob) -> Episode:
        return await run_builtin_job(job)


__all__ = ["BuiltinSource", "study_task_ids"]
