"""Evaluate the embedded agent: the test split of both built-in domains, scripted user,
greedy, one trial, per precision arm; then success and failure channels per (arm, domain).

Nothing is planted here: every failure is the model's own. Episodes go to
`<out>/<arm>.jsonl` through the study runner (a one-model study; resumable), so the analysis
and the report can read them like any other run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, Field

from flatscore import defaults
from flatscore.analysis.arm_stats import arm_stats
from flatscore.analysis.channels import LEAF_CHANNELS, load_rules
from flatscore.analysis.facts import EpisodeFacts, episode_facts
from flatscore.episode import Episode
from flatscore.models.shared import clear_backends
from flatscore.run.driver import run_study
from flatscore.store.jsonl import read_episodes
from flatscore.study import Study

EVAL_ARMS = ("ref", "int8", "int4", "int4-awq", "int3")
EVAL_DOMAINS = ("retail", "telecom")
EVAL_MAX_ERRORS = 30
# Episodes in flight: one arm's batch engine decodes them together (docs/backends.md). The
# results do not depend on it (batch invariance); one at a time would pad every forward
# pass to 16 rows for a single sequence, about 2x slower than before batching.
EVAL_CONCURRENCY = 16
"""The recorded budget of the evaluation in docs/embedded.md (more generous than the run
default, τ²'s 10, so the card's numbers stay reproducible)."""


class ArmDomainSummary(BaseModel):
    """Success and failure counts of one arm in one domain, and its channel rates as
    analysis.json has them (`flatscore.analysis.arm_stats`: task-weighted)."""

    arm: str
    domain: str
    episodes: int
    succeeded: int
    agent_calls: int
    failed_calls: int
    malformed: int
    channels: dict[str, int] = Field(default_factory=dict)
    terminations: dict[str, int] = Field(default_factory=dict)
    channel_rates: dict[str, float | None]
    """Per leaf channel: failed agent calls in the channel / all agent tool calls
    (docs/analysis.md, "Definitions"), task-weighted (each task's trials averaged first),
    without infrastructure errors; None without agent calls. malformed_output: per attempt
    (agent calls + malformed turns)."""

    @property
    def success_rate(self) -> float:
        return self.succeeded / self.episodes if self.episodes else 0.0

    def channel_rate(self, channel: str) -> float | None:
        """The analysis' task-weighted rate of `channel` (see `channel_rates`)."""
        return self.channel_rates.get(channel)


def run_arm(
    arm: str,
    out_dir: str | Path,
    *,
    model: str = "embedded",
    domains: tuple[str, ...] = EVAL_DOMAINS,
    split: str = "test",
    seed: int = defaults.SEED,
    task_ids: list[str] | None = None,
    progress: bool = True,
    threads: int = 1,
    concurrency: int = EVAL_CONCURRENCY,
) -> Path:
    """Run (or resume) arm `arm` on the split; returns the episodes file. A one-model
    study (like the quick form of `flatscore run`) written to `<out_dir>/<arm>.jsonl`."""
    out = Path(out_dir) / f"{arm}.jsonl"
    study = eval_study(
        arm,
        model=model,
        domains=domains,
        split=split,
        seed=seed,
        task_ids=task_ids,
        threads=threads,
        concurrency=concurrency,
    )
    try:
        run_study(study, resume=True, progress=progress, report=False, run_file=out)
    finally:
        clear_backends()  # one arm's weights at a time
    return out


def eval_study(
    arm: str,
    *,
    model: str = "embedded",
    domains: tuple[str, ...] = EVAL_DOMAINS,
    split: str = "test",
    seed: int = defaults.SEED,
    task_ids: list[str] | None = None,
    threads: int = 1,
    concurrency: int = EVAL_CONCURRENCY,
) -> Study:
    """The one-model study behind `run_arm`."""
    return Study.model_validate(
        {
            "name": "embedded-eval",
            "models": [
                {
                    "name": model,
                    "kind": "embedded" if model == "embedded" else "local",
                    "path": None if model == "embedded" else model,
                    "arms": [arm],
                    "sampling": {"max_tokens": defaults.AGENT_MAX_TOKENS},
                    "threads": threads,
                }
            ],
            "domains": list(domains),
            "split": split,
            "task_ids": task_ids,
            "seed": seed,
            "error_budget": {"max_errors": EVAL_MAX_ERRORS},
            "concurrency": concurrency,
        }
    )


def summarize(path: str | Path) -> list[ArmDomainSummary]:
    """Per (arm, domain) counts from an episodes file."""
    return summarize_episodes(read_episodes(path))


def summarize_episodes(episodes: Iterable[Episode]) -> list[ArmDomainSummary]:
    """Per (arm, domain) counts from episodes; the channel rates from the analysis."""
    rules = load_rules()
    groups: dict[tuple[str, str], list[tuple[Episode, EpisodeFacts]]] = {}
    for episode in episodes:
        key = (episode.arm, episode.domain)
        groups.setdefault(key, []).append((episode, episode_facts(episode, rules)))
    return [_summary(arm, domain, groups[(arm, domain)]) for arm, domain in sorted(groups)]


def _summary(arm: str, domain: str, group: list[tuple[Episode, EpisodeFacts]]) -> ArmDomainSummary:
    facts = [f for _, f in group]
    usable = [f for e, f in group if not e.is_infrastructure_error]
    rates: dict[str, float | None] = dict.fromkeys(LEAF_CHANNELS)
    if usable:
        stats = arm_stats(arm, usable, len(facts) - len(usable), budgets=[0], count="all")
        rates = {c: stats.channels[c].rate for c in LEAF_CHANNELS}
    channels = dict.fromkeys(LEAF_CHANNELS, 0)
    for f in facts:
        for channel, n in f.channels.items():
            channels[channel] = channels.get(channel, 0) + n
    return ArmDomainSummary(
        arm=arm,
        domain=domain,
        episodes=len(facts),
        succeeded=sum(f.succeeded for f in facts),
        agent_calls=sum(f.agent_calls for f in facts),
        failed_calls=sum(f.agent_failed for f in facts),
        malformed=sum(f.malformed for f in facts),
        channels=channels,
        terminations=dict(Counter(f.termination for f in facts)),
        channel_rates=rates,
    )
