"""The cost figures in words (docs/analysis.md, "Cost"): each figure's unit, how it was
measured, and the warnings that make arms hard to compare on speed. The analysis measures
(`analysis.cost`: the rows, the load each arm saw, whether a process served several arms);
analysis.json's `cost.units`, `cost.how` and `cost.warnings` are these words
(`analysis_text.worded`)."""

from __future__ import annotations

from flatscore.analysis.result import CostSummary

LOAD_RATIO_WARNING = 1.25
"""Arms whose mean episodes-in-flight differ by more than this factor ran under different
load: their latency and tokens/s are not comparable."""

UNITS = {
    "weight_bytes": "bytes",
    "resident_weight_bytes": "bytes",
    "peak_rss_bytes": "bytes",
    "bits_per_parameter": "bits",
    "prefill_tokens_per_s": "tokens/s",
    "decode_tokens_per_s": "tokens/s",
    "turn_latency_p50_s": "s",
    "turn_latency_p95_s": "s",
    "prompt_tokens_per_episode": "tokens",
    "completion_tokens_per_episode": "tokens",
    "wall_s_per_episode": "s",
    "wall_s_per_success": "s",
    "episodes_in_flight": "episodes",
    "machine_s_per_episode": "s",
    "machine_s_per_success": "s",
    "money_per_1k_episodes": "currency (see `currency`)",
    "money_per_success": "currency (see `currency`)",
}

HOW = {
    "weight_bytes": (
        "the arm's format as a checkpoint stores it: each quantized Linear weight at the "
        "format's bits plus fp16 scales (and offsets), every other parameter as loaded; "
        "recorded by the local backend (Episode.serving), null for endpoint arms"
    ),
    "bits_per_parameter": "8 × weight_bytes / parameters (embeddings and norms included)",
    "resident_weight_bytes": (
        "bytes the parameters occupy in the serving process (fake-quantized arms keep the "
        "compute dtype, so this is the reference's size)"
    ),
    "peak_rss_bytes": (
        "largest peak resident memory the serving process reported at the end of an episode "
        "(getrusage); a process serving several arms reports one peak for all of them"
    ),
    "prefill_tokens_per_s": (
        "Σ prompt tokens encoded (prefix-cache hits excluded) / Σ time from request to first "
        "token, over agent turns with a recorded timing (includes waiting for a batch slot)"
    ),
    "decode_tokens_per_s": (
        "Σ completion tokens / Σ time from first to last token, over agent turns with a "
        "recorded timing: one request's rate as its client saw it (a batching server's total "
        "throughput is higher)"
    ),
    "timing_source": (
        "backend: measured in the local backend; endpoint: the server's own timings "
        "(llama.cpp); none: not recorded (only client-side latency)"
    ),
    "turn_latency_p50_s": "median client-side latency of one agent turn (request to reply)",
    "turn_latency_p95_s": "95th percentile (linear interpolation) of the same",
    "prompt_tokens_per_episode": (
        "mean prompt tokens of the agent's turns per episode, as the backend or endpoint "
        "counted them (an LLM user's tokens are not included; imports without per-turn "
        "usage: Episode.usage)"
    ),
    "completion_tokens_per_episode": "the same for completion tokens",
    "wall_s_per_episode": "mean Episode.timing.duration_s (episodes in flight overlap)",
    "wall_s_per_success": "Σ duration_s over all episodes / successful episodes",
    "episodes_in_flight": (
        "time-averaged number of episodes (any arm) running during this arm's episodes, "
        "from their recorded start and end times: 1 = ran alone"
    ),
    "machine_s_per_episode": (
        "each episode's duration divided by the episodes in flight with it (the machine's "
        "time shared equally), averaged"
    ),
    "machine_s_per_success": "Σ machine seconds / successful episodes",
    "money_per_1k_episodes": (
        "1000 × mean per-episode cost: prompt and completion tokens at the study file's "
        "price per 1M tokens plus machine seconds at its price per hour"
    ),
    "money_per_success": "Σ per-episode cost / successful episodes",
    "successes": "episodes with reward 1 that ended by a stop (Episode.succeeded)",
}


def load_warnings(cost: CostSummary) -> list[str]:
    """What makes the arms' speed and memory hard to compare: different load, concurrent
    episodes, one process serving several arms."""
    rows = cost.arms
    out: list[str] = []
    loads = {f"{r.model}/{r.domain}/{r.arm}": r.episodes_in_flight for r in rows}
    known = {k: v for k, v in loads.items() if v is not None}
    if len(known) > 1:
        lo, hi = min(known, key=known.__getitem__), max(known, key=known.__getitem__)
        if known[hi] > LOAD_RATIO_WARNING * known[lo]:
            out.append(
                f"arms ran under different load: {known[hi]:.2f} episodes in flight on average "
                f"during {hi}'s episodes, {known[lo]:.2f} during {lo}'s; their latency, "
                "tokens/s and seconds are not comparable"
            )
    if any(v > 1.05 for v in known.values()):
        out.append(
            "episodes ran concurrently (up to "
            f"{max(known.values()):.2f} in flight on average): latency and tokens/s include "
            "contention for the shared machine; machine seconds share it out"
        )
    if cost.shared_process:
        out.append(
            "several arms were served by one process: its peak resident memory is theirs "
            "together, not one arm's"
        )
    return out


def worded_cost(cost: CostSummary) -> CostSummary:
    """`cost` with its units, how and warnings filled in (itself when it has them: an
    analysis read back from analysis.json)."""
    if cost.units:
        return cost
    return cost.model_copy(update={"units": UNITS, "how": HOW, "warnings": load_warnings(cost)})
