"""The definition text each reported number follows (docs/analysis.md, "Definitions"),
written into analysis.json and shown next to the numbers, so output says which definition it
follows. Composed from the analysis' settings alone (`analysis_text.worded` fills it in)."""

from __future__ import annotations

from flatscore.analysis.result import Settings


def definitions(settings: Settings) -> dict[str, str]:
    count, default_k, margin = settings.count, settings.default_K, settings.tost_margin
    n_boot, min_tasks = settings.bootstrap, settings.bootstrap_min_tasks
    alpha, tight_k = settings.alpha, settings.tight_budget
    counted = (
        "agent and user failed calls (like τ²)" if count == "all" else "agent failed calls only"
    )
    corr = "Holm" if settings.correction == "holm" else "Benjamini–Hochberg"
    return {
        "agent_tool_call": "A function call issued by the agent (requestor agent). User-side "
        "calls are counted separately and never enter agent channel rates.",
        "failed_call": "The environment answered the call with an error (tool result error).",
        "episodes": "Episodes ending in infrastructure_error are excluded from every rate and "
        "from pass^k, and counted separately.",
        "success": "Reward 1 and a rewardable termination (user_stop or agent_stop).",
        "weighting": "Task-weighted throughout: each task's episodes are averaged first, then "
        "tasks are averaged (success rates, S(K), gaps, tests); ratios are Σ per-task mean "
        "numerator / Σ per-task mean denominator (channel rates, recovery). Every task counts "
        "once whatever its number of trials. Counts are plain sums.",
        "channels": "A failed agent call's channel, first match wins: the recorded error_kind; "
        "unknown_tool if the name is not one of the agent's tools (split by the name rules, "
        "first match wins: role_confusion if it is one of the user's tools; near_miss if a "
        "plural/case/separator variant or within a small edit distance of an agent tool; "
        "invented if identifier-shaped; else not_a_name: text or arguments in the name "
        "slot); bad_arguments if the arguments did not parse; "
        "else the error-text rules (per domain, then defaults); else other. malformed_output = "
        "assistant outputs that could not be parsed into a call or message.",
        "channel_rate": "Failed agent calls in the channel / all agent tool calls. "
        "malformed_output, which never becomes a call, is counted per attempted call: "
        "malformed outputs / (agent tool calls + malformed outputs).",
        "budget_curve": f"S(K) = share of episodes with reward 1 whose failed-call count "
        f"({counted}) is ≤ K, recomputed from logs (an episode over K counts as failed even if "
        "it finished). τ² max_errors = M corresponds to S(M − 1); S(K) for K ≥ M is not "
        "recomputable from logs recorded with budget M (marked recomputable: false).",
        "default_K": f"K = {default_k}: the recorded budget (max_errors − 1; max_errors 0, τ²'s "
        "no limit: the episodes' largest failed-call count), else 9.",
        "gap": "Gap(K) = S_ref(K) − S_arm(K) on the tasks both arms ran (paired, "
        "task-weighted), with a 95% paired interval on the per-task differences: t (n − 1 "
        "df) with ≥ 6 discordant tasks, else Tango's score interval; calibrated at every study "
        "size by simulation, never collapsing to [0, 0].",
        "gap_amplification": "Gap(K_small) / Gap(K_default), K_small = the smallest K asked; "
        "null when Gap(K_default) = 0.",
        "gap_growth": "Gap(K_small) − Gap(K_default) with the same 95% paired interval: the "
        "hidden gap reappearing as the budget tightens.",
        "channel_amplification": "rate_arm / rate_ref (and count_arm / count_ref) on the "
        "paired tasks, with a 95% CI and a two-sided test on the log ratio of summed per-task "
        "failures over summed per-task calls (leave-one-task-out jackknife SE, Student t, "
        "n − 1 df). p_adjusted corrects p over the study's channel comparisons "
        f"(channel_family, {corr}). Amplified = ratio > 1 and p_adjusted < {alpha:g}. Null when "
        "the reference rate is 0. failed_calls: the same for all failed agent calls (is there "
        "more failure at all?), corrected over the study's comparisons.",
        "spearman_rho": "Spearman rank correlation of per-name hallucination counts "
        "(unknown_tool calls) over the union of names of both arms, zeros included; CI by the "
        "task bootstrap.",
        "novel_fraction": "Share of the arm's hallucinated calls whose name the reference never "
        "produced.",
        "recovery_rate": "Failed agent calls whose next agent tool call in the episode succeeds "
        "/ all failed agent calls (no later call = not recovered).",
        "episode_recovery_rate": "Episodes with ≥ 1 failed agent call that still succeed / "
        "episodes with ≥ 1 failed agent call.",
        "trajectory": "Agent turns (assistant messages), agent tool calls and messages per "
        "episode: mean and quartiles per arm; paired difference arm − reference of the "
        "per-episode mean on common tasks, with a bootstrap CI.",
        "pass_k": "pass^k (τ²): per task C(successes, k) / C(trials, k), averaged over tasks, "
        "k = 1..min trials; index 0 = pass^1.",
        "bootstrap": f"Spearman ρ, trajectory and recovery differences: 95% "
        f"percentile CIs from a task-level cluster bootstrap, {n_boot} resamples, paired across "
        "arms (the same resampled tasks for every arm of a cell), seeded per cell — only when "
        f"the cell has ≥ {min_tasks} paired tasks; below that these CIs are null with a note "
        "(a percentile bootstrap over few tasks collapses); channel ratios get no interval or test "
        "there either, and nothing is called amplified.",
        "paired_test": "Two-sided paired test of the per-task success differences at default "
        "K (t-test, or McNemar's score test with < 6 discordant tasks): the statistic whose "
        f"inversion is the Gap interval, so p < {alpha:g} iff the {100 * (1 - alpha):g}% CI "
        "excludes 0.",
        "correction": f"{corr} adjustment across all comparisons of the study "
        "(p_holm is always Holm; p_bh always BH; p_adjusted follows the chosen correction).",
        "tost": f"TOST equivalence within ±{margin:g} (fraction) at default K: two one-sided "
        "paired tests on the same statistic as the Gap interval; equivalent when both "
        f"reject at {alpha:g} (⇔ the {100 * (1 - 2 * alpha):g}% interval lies inside the "
        "margin). A drop beyond the margin is ruled out when the upper test alone rejects "
        "(budget_tests: drop_bound, the interval's upper end, below the margin).",
        "risk_screen": "From the reference arm alone: at risk when some channel rate is ≥ the "
        "threshold (an established failure channel), low risk otherwise.",
        "verdict": "One rule for analyze, report and gate, read at the default K and the "
        f"tight K = {tight_k} (budget_tests). visible damage: a significant (adjusted p < "
        f"{alpha:g}) success drop at default K whose drop beyond the margin is not ruled out. "
        "flat score, amplified failures: a drop beyond the margin ruled out at default K, and "
        "more failed calls overall or some channel amplified (corrected test), a significant "
        "drop beyond the margin at the tight K, or the gap growing at small K (gap_growth CI "
        "above 0); the reason says when failures moved between channels without a rise in all "
        "failed calls. inconclusive: a drop beyond the margin not ruled out at a tested K "
        "(amplified failures beside it are named), a channel new in the arm with no test, or "
        "too few paired tasks to test channels. no damage detected: none of these (a "
        "significant drop inside the margin is named in the reason, not damage). nothing to "
        "compare: a cell with one arm. A cell takes its worst comparison's verdict (visible "
        "damage > flat score, amplified failures > inconclusive > no damage detected).",
        "reference": "Named with --reference, or decided from format words in the arm names "
        "(fp64 > fp32 > ref > bf16 > fp16 > fp8 > int8/Q8_0 > w8a8 > Q6_K > Q5_K > "
        "int4-awq/gptq > Q4_K_M > int4/Q4_0/nf4 > int3 > int2); a single arm without a format "
        "word next to quantized ones is the original checkpoint; anything else is an error "
        "asking for --reference.",
    }
