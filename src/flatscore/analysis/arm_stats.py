"""Everything measured on one arm, task-weighted (docs/analysis.md, "Definitions" and
"Weighting"): rates come from the arm's task matrix, counts are plain sums."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from flatscore.analysis.budget import recorded_max_errors
from flatscore.analysis.channels import CHANNELS, LEAF_CHANNELS, UNKNOWN_TOOL_LEAVES
from flatscore.analysis.facts import EpisodeFacts
from flatscore.analysis.paired_score import wilson_interval
from flatscore.analysis.passk import pass_hat_k
from flatscore.analysis.result import ArmStats, BudgetPoint, ChannelStat
from flatscore.analysis.task_matrix import MALFORMED, task_matrix
from flatscore.analysis.trajectory import trajectory_stats
from flatscore.defaults import CONFIDENCE


def arm_stats(
    arm: str,
    facts: Sequence[EpisodeFacts],
    infrastructure: int,
    budgets: Sequence[int],
    count: str,
    confidence: float = CONFIDENCE,
) -> ArmStats:
    """One arm's numbers (`facts` already without infrastructure errors). Rates and S(K) are
    task-weighted; S(K) intervals are Wilson score intervals over the arm's tasks."""
    per_task: dict[str, list[bool]] = {}
    for f in facts:
        per_task.setdefault(f.task_id, []).append(f.succeeded)
    tasks = sorted(per_task)
    trials = [len(per_task[t]) for t in tasks]
    m = task_matrix(facts, tasks, budgets, count)
    leaf = {ch: sum(f.channels[ch] for f in facts) for ch in LEAF_CHANNELS}
    counts = {**leaf, "unknown_tool": sum(leaf[ch] for ch in UNKNOWN_TOOL_LEAVES)}
    recorded = recorded_max_errors(facts)
    hallucinated: Counter[str] = Counter()
    for f in facts:
        hallucinated.update(f.hallucinated)
    curve = []
    for k in budgets:
        lo, hi = wilson_interval(m.column(f"S{k}"), confidence)
        curve.append(
            BudgetPoint(
                K=k,
                success_rate=m.rate(f"S{k}", "task"),
                ci_low=lo,
                ci_high=hi,
                recomputable=recorded is None or k < recorded,
            )
        )
    return ArmStats(
        arm=arm,
        episodes=len(facts),
        infrastructure_errors=infrastructure,
        tasks=len(tasks),
        trials_min=min(trials, default=0),
        trials_max=max(trials, default=0),
        success_rate=m.rate("succeeded", "task"),
        average_reward=m.rate("reward", "task"),
        pass_k=pass_hat_k([sum(per_task[t]) for t in tasks], trials),
        agent_tool_calls=sum(f.agent_calls for f in facts),
        failed_agent_calls=sum(f.agent_failed for f in facts),
        unanswered_agent_calls=sum(f.unanswered for f in facts),
        channels={
            ch: ChannelStat(
                count=counts[ch], rate=m.rate(ch, "attempts" if ch == MALFORMED else "calls")
            )
            for ch in CHANNELS
        },
        user_tool_calls=sum(f.user_calls for f in facts),
        user_failed_calls=sum(f.user_failed for f in facts),
        malformed_outputs=leaf["malformed_output"],
        budget_curve=curve,
        max_failed_calls=max((f.failed_calls(count) for f in facts), default=0),
        recorded_max_errors=recorded,
        recovery_rate=m.rate("recovered", "agent_failed"),
        recovered_calls=sum(f.recovered for f in facts),
        failed_calls_with_next_call=sum(f.failed_with_next for f in facts),
        episodes_with_failure=sum(1 for f in facts if f.agent_failed > 0),
        episode_recovery_rate=m.rate("succeeded_with_failure", "with_failure"),
        repeated_failed_calls=sum(f.repeats for f in facts),
        repeat_share=m.rate("repeats", "agent_failed"),
        reissued_calls=sum(f.reissued for f in facts),
        reissued_failed_calls=sum(f.reissued_failed for f in facts),
        reissue_share=m.rate("reissued", "calls"),
        termination_reasons=dict(sorted(Counter(f.termination for f in facts).items())),
        trajectory=trajectory_stats(facts),
        hallucinated_names=dict(sorted(hallucinated.items())),
        tool_list_sources=dict(sorted(Counter(f.tool_list_source for f in facts).items())),
    )
