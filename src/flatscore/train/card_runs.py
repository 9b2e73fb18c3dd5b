"""The card's evaluation from `flatscore run` files (`<model>__<arm>.jsonl`), such as a
sampled study of the adapter with a planted-damage control beside it: the channel table of
`eval-embedded`, plus recovery and S(K) as the analysis computes them (`flatscore.analysis.
arm_stats`; docs/analysis.md, "Definitions"), and the scope the files cover
against the study that wrote them.
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
from flatscore.report.markdown_table import table_lines
from flatscore.run.study import load_study
from flatscore.study import Study
from flatscore.train.card_eval import RATES_STATED, eval_table

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


def _points(rate: float | None) -> str:
    return f"{100 * rate:.1f}" if rate is not None else "–"


def _row(arm: str, domain: str, c: Cell) -> list[str]:
    s = c.stats
    curve = {p.K: p for p in s.budget_curve}
    # S(K) from a run cut at max_errors <= K is a lower bound (not recomputable past the cut)
    scores = [
        f"{'' if curve[k].recomputable else '≥ '}{_points(curve[k].success_rate)}" for k in BUDGETS
    ]
    first, last = curve[BUDGETS[0]], curve[BUDGETS[-1]]
    spread = "–"
    if first.success_rate is not None and last.success_rate is not None and last.recomputable:
        spread = f"{100 * (last.success_rate - first.success_rate):.1f}"
    return [
        arm,
        domain,
        str(s.episodes),
        str(s.failed_agent_calls),
        str(c.planted_failed) if c.planted else "–",
        f"{s.recovered_calls} ({_points(s.recovery_rate)}%)"
        if s.recovery_rate is not None
        else "–",
        f"{c.succeeded_with_failure} of {s.episodes_with_failure}",
        *scores,
        spread,
    ]


def recovery_table(episodes: list[Episode]) -> str:
    """Arms × domains: failed agent calls (and how many were planted), recovered calls and
    the recovery rate, episodes with a failed call that still succeed, and S(K) in points."""
    head = [
        "arm",
        "domain",
        "episodes",
        "failed agent calls",
        "of them planted",
        "recovered (recovery)",
        "episodes with a failure: succeeded",
        *[f"S({k})" for k in BUDGETS],
        f"S({BUDGETS[-1]}) − S(0)",
    ]
    rows = [_row(arm, domain, c) for (arm, domain), c in cells(episodes).items()]
    return "\n".join(table_lines(head, rows, "llr"))


RECOVERY_STATED = (
    "Recovery and S(K) are analysis.json's (`flatscore.analysis`): recovery = failed agent "
    "calls whose next agent tool call in the episode succeeds / all failed agent calls (no "
    "later call = not recovered), task-weighted; S(K) = share of episodes with reward 1 and "
    "at most K failed calls (agent and user, as the run's budget counted), in points, "
    "task-weighted. `of them planted`: failed calls the `inject` arm perturbed (its damage "
    "of known size); the rest are the model's own."
)


def study_scope(study: Study, episodes: list[Episode], runs_dir: Path) -> list[str]:
    """What the study planned against what the files hold, per arm and domain, and how it
    sampled."""
    from flatscore.run.driver import plan_study

    planned = Counter((job.arm, job.domain) for job in plan_study(study).jobs)
    ran = Counter((e.arm, e.domain) for e in episodes)
    lines = []
    for model in study.models:
        s = model.sampling
        lines.append(
            f"- Study `{study.name}`: model `{model.name}` ({model.kind}), sampling "
            f"temperature {s.temperature:g}, top-p {s.top_p:g}, at most {s.max_tokens} tokens "
            f"per turn; {study.user.kind} user, {study.split} split, {study.trials} "
            f"trial(s), seed {study.seed}, budget max_errors {study.error_budget.max_errors} "
            f"({study.error_budget.counted} failed calls), max_steps {study.max_steps}."
        )
        for name, spec in model.arms.items():
            if spec.inject is not None:
                rates = spec.inject.model_dump(exclude={"base"}, exclude_none=True)
                text = ", ".join(f"{k} p = {v:g}" for k, v in rates.items())
                lines.append(
                    f"- `{name}` = `{spec.inject.base}` with damage planted into its calls at "
                    f"run time (`inject`: {text}); a positive control."
                )
    for arm, domain in sorted(planned):
        done, want = ran[(arm, domain)], planned[(arm, domain)]
        note = " (not run)" if done == 0 else "" if done == want else " (stopped before the end)"
        lines.append(f"- `{arm}` · {domain}: {done} of {want} planned episodes{note}.")
    extra = sorted(set(ran) - set(planned))
    if extra:
        raise InputError(
            f"holds episodes the study does not plan ({', '.join(f'{a} · {d}' for a, d in extra)})",
            file=str(runs_dir),
        )
    return lines


def runs_section(runs_dir: Path, study_file: Path | None) -> list[str]:
    """The evaluation section's lines for the run files in `runs_dir`."""
    from flatscore.train.evaluate import summarize_episodes

    episodes = read_runs(runs_dir)
    if study_file is not None:
        scope = study_scope(load_study(study_file), episodes, runs_dir)
    else:
        cells = Counter((e.arm, e.domain) for e in episodes)
        scope = [f"- `{a}` · {d}: {n} episodes." for (a, d), n in sorted(cells.items())]
        scope.append("- The sampling is not recorded in episodes: pass the study file.")
    return [
        "",
        "### Sampled (`flatscore run` files)",
        "",
        "Scope (what the run files hold; nothing else was evaluated):",
        *scope,
        "",
        RATES_STATED,
        "",
        eval_table(summarize_episodes(episodes)),
        "",
        RECOVERY_STATED,
        "",
        recovery_table(episodes),
    ]
