"""The card's evaluation from `flatscore run` files (`<model>__<arm>.jsonl`), such as a
sampled study of the adapter with a planted-damage control beside it, as data (its text:
`flatscore.cli.embedded_card_runs`): recovery and S(K) as the analysis computes them
(`flatscore.analysis.arm_stats`; docs/analysis.md, "Definitions"), and the scope the files
cover against the study that wrote them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from flatscore.analysis.arm_stats import arm_stats
from flatscore.analysis.channels import load_rules
from flatscore.analysis.facts import episode_facts
from flatscore.analysis.result import ArmStats
from flatscore.episode import Episode
from flatscore.errors import InputError
from flatscore.run.study import load_study
from flatscore.study import Study

BUDGETS = (0, 2, 9)
"""S(K) at no failure, a tight budget, and τ²'s default (max_errors 10 = K 9)."""


def read_runs(runs_dir: Path) -> list[Episode]:
    """Every episode of the run files in `runs_dir`, read as every command reads a run folder
    (`archive.run_files`, `formats.load_runs`): no folder, no run file or no episode is one
    line naming the folder or the files."""
    from flatscore.formats import load_runs
    from flatscore.store.archive import run_files

    return list(load_runs(run_files(runs_dir)))


def planted_failures(episode: Episode) -> tuple[int, int]:
    """(calls the `inject` arm perturbed, how many of those failed) in one episode."""
    changes = (episode.metadata.get("injected") or {}).get("changes") or []
    ids = {c.get("call_id") for c in changes}
    failed = {
        m.tool_result.call_id
        for m in episode.messages
        if m.tool_result is not None and m.tool_result.error
    }
    return len(ids), len(ids & failed)


@dataclass(frozen=True)
class Cell:
    """One arm in one domain: the analysis' numbers and the counts behind them."""

    stats: ArmStats
    succeeded_with_failure: int
    planted: int
    planted_failed: int


def cells(episodes: list[Episode]) -> dict[tuple[str, str], Cell]:
    """Per (arm, domain): the analysis' numbers at `BUDGETS`, counting failed calls as the
    episodes' budget did (`all` unless every episode says `agent`)."""
    rules = load_rules()
    groups: dict[tuple[str, str], list[Episode]] = {}
    for e in episodes:
        groups.setdefault((e.arm, e.domain), []).append(e)
    out = {}
    for (arm, domain), group in sorted(groups.items()):
        facts = [episode_facts(e, rules) for e in group]
        usable = [f for f in facts if not f.infrastructure]
        count = "agent" if all(f.counted == "agent" for f in facts) else "all"
        planted = [planted_failures(e) for e in group]
        out[(arm, domain)] = Cell(
            stats=arm_stats(arm, usable, len(facts) - len(usable), budgets=BUDGETS, count=count),
            succeeded_with_failure=sum(f.succeeded and f.agent_failed > 0 for f in usable),
            planted=sum(n for n, _ in planted),
            planted_failed=sum(n for _, n in planted),
        )
    return out


@dataclass(frozen=True)
class Scope:
    """What the study planned against what the run files hold, per (arm, domain)."""

    study: Study
    planned: Counter[tuple[str, str]]
    ran: Counter[tuple[str, str]]


def study_scope(study: Study, episodes: list[Episode], runs_dir: Path) -> Scope:
    """The study's plan beside the episodes; episodes it does not plan are one line."""
    from flatscore.run.driver import plan_study

    planned = Counter((job.arm, job.domain) for job in plan_study(study).jobs)
    ran = Counter((e.arm, e.domain) for e in episodes)
    extra = sorted(set(ran) - set(planned))
    if extra:
        raise InputError(
            f"holds episodes the study does not plan ({', '.join(f'{a} · {d}' for a, d in extra)})",
            file=str(runs_dir),
        )
    return Scope(study=study, planned=planned, ran=ran)


@dataclass(frozen=True)
class RunsEvaluation:
    """The run files' episodes and, with the study file, their scope against its plan."""

    episodes: list[Episode]
    scope: Scope | None


def runs_evaluation(runs_dir: Path, study_file: Path | None) -> RunsEvaluation:
    episodes = read_runs(runs_dir)
    scope = None if study_file is None else study_scope(load_study(study_file), episodes, runs_dir)
    return RunsEvaluation(episodes=episodes, scope=scope)
