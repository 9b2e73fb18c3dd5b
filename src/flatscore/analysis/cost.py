"""What each arm cost to run, from what the episodes recorded (docs/analysis.md, "Cost").

Quality has its own statistics; cost is descriptive: sums, means and percentiles of what the
backend (or the endpoint, or the client) measured while the episodes ran. Arms that ran
under different load are not comparable on speed, so the load each arm saw is measured too
(episodes in flight, from the episodes' own start and end times) and a warning says when it
differs. Each figure's unit, how it was measured and the warnings are words, the report's
(`flatscore.report.cost_notes`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

import numpy as np

from flatscore.analysis.result import ArmCost, CostSummary
from flatscore.analysis.settings import Price
from flatscore.episode import Episode, TokenUsage


def _seconds(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


def in_flight(spans: Sequence[tuple[float, float] | None]) -> list[float | None]:
    """For each [start, end] span, the time-averaged number of spans (itself included)
    running during it; None for a missing or empty span."""
    known = [(i, s, e) for i, sp in enumerate(spans) if sp is not None for s, e in [sp] if e > s]
    out: list[float | None] = [None] * len(spans)
    if not known:
        return out
    starts = np.array([s for _, s, _ in known])
    ends = np.array([e for _, _, e in known])
    times = np.unique(np.concatenate([starts, ends]))
    # concurrency on each interval [times[j], times[j+1])
    level = np.searchsorted(np.sort(starts), times, side="right") - np.searchsorted(
        np.sort(ends), times, side="right"
    )
    area = np.concatenate([[0.0], np.cumsum(level[:-1] * np.diff(times))])
    a = area[np.searchsorted(times, starts)]
    b = area[np.searchsorted(times, ends)]
    for (i, s, e), lo, hi in zip(known, a, b, strict=True):
        out[i] = float((hi - lo) / (e - s))
    return out


def _span(ep: Episode) -> tuple[float, float] | None:
    start = _seconds(ep.timing.started_at)
    end = _seconds(ep.timing.ended_at)
    if start is None:
        return None
    if ep.timing.duration_s is not None:
        end = start + ep.timing.duration_s
    return (start, end) if end is not None else None


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _per(total: float | None, n: int) -> float | None:
    return total / n if total is not None and n else None


def agent_usage(ep: Episode) -> TokenUsage:
    """The agent's tokens: its turns' usage (an LLM user simulator's turns carry their own,
    and Episode.usage sums both); Episode.usage when no turn recorded any (imports)."""
    turns = [m.usage for m in ep.messages if m.role == "assistant" and m.usage is not None]
    return sum(turns, TokenUsage()) if turns else ep.usage


def price_for(prices: dict[str, Price], model: str, arm: str) -> Price | None:
    return prices.get(f"{model}/{arm}") or prices.get(arm)


def _money(ep: Episode, machine_s: float | None, price: Price) -> float | None:
    parts: list[float] = []
    usage = agent_usage(ep)
    if price.per_1m_prompt_tokens is not None:
        parts.append(usage.prompt_tokens * price.per_1m_prompt_tokens / 1e6)
    if price.per_1m_completion_tokens is not None:
        parts.append(usage.completion_tokens * price.per_1m_completion_tokens / 1e6)
    if price.per_hour is not None:
        if machine_s is None:
            return None
        parts.append(machine_s * price.per_hour / 3600)
    return sum(parts) if parts else None


_WEIGHTS = {"parameters", "weight_bytes", "bits_per_parameter", "resident_weight_bytes"}
"""The `Serving` figures an arm's cost row repeats (from its last episode)."""


def arm_cost(
    model: str,
    domain: str,
    arm: str,
    episodes: list[Episode],
    flight: list[float | None],
    price: Price | None,
) -> ArmCost:
    """One arm's figures; `flight[i]` is episode i's episodes-in-flight (None: unknown)."""
    successes = sum(ep.succeeded for ep in episodes)
    servings = [ep.serving for ep in episodes if ep.serving is not None]
    last = servings[-1] if servings else None
    weights = last.model_dump(include=_WEIGHTS) if last else {}  # as the last episode served
    peaks = [s.peak_rss_bytes for s in servings if s.peak_rss_bytes is not None]
    latencies: list[float] = []
    enc = pre = comp = dec = 0.0
    sources: set[str] = set()
    for ep in episodes:
        for m in ep.messages:
            if m.role != "assistant" or m.latency_s is None:
                continue  # the fixed greeting was not generated
            latencies.append(m.latency_s)
            t = m.timing
            if t is None or m.usage is None:
                continue
            sources.add(t.source)
            if t.prefill_s is not None and t.encoded_tokens is not None:
                enc, pre = enc + t.encoded_tokens, pre + t.prefill_s
            if t.decode_s is not None:
                comp, dec = comp + m.usage.completion_tokens, dec + t.decode_s
    durations = [ep.timing.duration_s for ep in episodes if ep.timing.duration_s is not None]
    machine = [
        ep.timing.duration_s / f
        for ep, f in zip(episodes, flight, strict=True)
        if ep.timing.duration_s is not None and f
    ]
    complete_machine = len(machine) == len(episodes)
    money: float | None = None
    if price is not None and episodes:
        each = [
            _money(
                ep,
                ep.timing.duration_s / f if ep.timing.duration_s is not None and f else None,
                price,
            )
            for ep, f in zip(episodes, flight, strict=True)
        ]
        money = sum(x for x in each if x is not None) if all(x is not None for x in each) else None
    n = len(episodes)
    usages = [agent_usage(ep) for ep in episodes]
    has_usage = any(u.prompt_tokens or u.completion_tokens for u in usages)
    known_flight = [f for f in flight if f is not None]
    return ArmCost(
        model=model,
        domain=domain,
        arm=arm,
        episodes=n,
        successes=successes,
        **weights,
        peak_rss_bytes=max(peaks) if peaks else None,
        prefill_tokens_per_s=enc / pre if pre > 0 else None,
        decode_tokens_per_s=comp / dec if dec > 0 else None,
        timing_source="+".join(sorted(sources)) if sources else "none",
        agent_turns=len(latencies),
        turn_latency_p50_s=float(np.percentile(latencies, 50)) if latencies else None,
        turn_latency_p95_s=float(np.percentile(latencies, 95)) if latencies else None,
        prompt_tokens_per_episode=_mean([u.prompt_tokens for u in usages]) if has_usage else None,
        completion_tokens_per_episode=_mean([u.completion_tokens for u in usages])
        if has_usage
        else None,
        wall_s_per_episode=_mean(durations),
        wall_s_per_success=_per(sum(durations), successes) if durations else None,
        episodes_in_flight=_mean(known_flight),
        machine_s_per_episode=_mean(machine),
        machine_s_per_success=_per(sum(machine), successes) if complete_machine else None,
        money_per_1k_episodes=1000 * money / n if money is not None and n else None,
        money_per_success=_per(money, successes),
        currency=price.currency if price is not None else None,
    )


def cost_summary(episodes: Sequence[Episode], prices: dict[str, Price]) -> CostSummary:
    """The `cost` section for every (model, domain, arm) in `episodes`."""
    flight = in_flight([_span(ep) for ep in episodes])
    groups: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for i, ep in enumerate(episodes):
        groups[(ep.model, ep.domain, ep.arm)].append(i)
    rows = [
        arm_cost(
            model,
            domain,
            arm,
            [episodes[i] for i in idx],
            [flight[i] for i in idx],
            price_for(prices, model, arm),
        )
        for (model, domain, arm), idx in sorted(groups.items())
    ]
    shared = any(
        ep.serving is not None and (ep.serving.arms_in_process or 0) > 1 for ep in episodes
    )
    return CostSummary(arms=rows, units={}, how={}, warnings=[], shared_process=shared)
