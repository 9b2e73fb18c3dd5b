"""The card's evaluation tables in words: arms × domains from the evaluation summaries
(`flatscore eval-embedded`) or from `flatscore run` files (their numbers:
`flatscore.train.card_runs`), with recovery and S(K) as the analysis computes them, and the
scope the files cover against the study that wrote them."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from flatscore.analysis.channels import LEAF_CHANNELS
from flatscore.episode import Episode
from flatscore.report.markdown_table import table_lines
from flatscore.train.card_runs import BUDGETS, Cell, Scope, cells, runs_evaluation
from flatscore.train.evaluate import ArmDomainSummary, summarize_episodes

CHANNELS = LEAF_CHANNELS  # every failure once; unknown_tool = role_confusion + invented


def _pct(num: int, den: int) -> str:
    return f"{100 * num / den:.1f}%" if den else "–"


def percent(rate: float | None) -> str:
    """A rate in percent, "–" without one."""
    return f"{100 * rate:.1f}%" if rate is not None else "–"


RATES_STATED = (
    "Channel counts are failed agent calls; rates are analysis.json's (`flatscore.analysis`): "
    "failed agent calls in the channel / all agent tool calls, task-weighted (each task's "
    "trials averaged first, then summed over tasks; with one trial per task, count / agent "
    "calls); malformed_output counts unparseable turns."
)


def eval_table(summaries: list[ArmDomainSummary]) -> str:
    """Arms × domains: success, calls, failure channels (count, and the analysis' task-weighted
    rate per agent call)."""
    head = ["arm", "domain", "success", "agent calls", "failed", *CHANNELS, "terminations"]
    rows = []
    for s in summaries:
        row = [
            s.arm,
            s.domain,
            f"{s.succeeded}/{s.episodes} ({_pct(s.succeeded, s.episodes)})",
            str(s.agent_calls),
            str(s.failed_calls),
        ]
        for c in CHANNELS:
            n = s.channels.get(c, 0)
            row.append(f"{n} ({percent(s.channel_rate(c))})" if c != "malformed_output" else str(n))
        row.append(", ".join(f"{k} {v}" for k, v in sorted(s.terminations.items())))
        rows.append(row)
    return "\n".join(table_lines(head, rows, "l"))


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


def scope_lines(scope: Scope) -> list[str]:
    """What the study planned against what the files hold, per arm and domain, and how it
    sampled."""
    study, planned, ran = scope.study, scope.planned, scope.ran
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
    return lines


def runs_section(runs_dir: Path, study_file: Path | None) -> list[str]:
    """The evaluation section's lines for the run files in `runs_dir`."""
    runs = runs_evaluation(runs_dir, study_file)
    episodes = runs.episodes
    if runs.scope is not None:
        scope = scope_lines(runs.scope)
    else:
        counts = Counter((e.arm, e.domain) for e in episodes)
        scope = [f"- `{a}` · {d}: {n} episodes." for (a, d), n in sorted(counts.items())]
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
