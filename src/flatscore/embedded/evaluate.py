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
from flatscore.agents.model import DEFAULT_MAX_TOKENS
from flatscore.analysis.channels import LEAF_CHANNELS, load_rules
from flatscore.analysis.facts import episode_facts
from flatscore.episode import Episode
from flatscore.models.shared import clear_backends
from flatscore.store import read_episodes
from flatscore.study import Study
from flatscore.study_run import run_study

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
    """Success and failure counts of one arm in one domain."""

    arm: str
    domain: str
    episodes: int
    succeeded: int
    agent_calls: int
    failed_calls: int
    malformed: int
    channels: dict[str, int] = Field(default_factory=dict)
    terminations: dict[str, int] = Field(default_factory=dict)

    @property
    def success_rate(self) -> float:
        return self.succeeded / self.episodes if self.episodes else 0.0

    def channel_rate(self, channel: str) -> float:
        """Failed agent calls in `channel` / all agent tool calls (DESIGN "Channels")."""
        return self.channels.get(channel, 0) / self.agent_calls if self.agent_calls else 0.0


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
                    "sampling": {"max_tokens": DEFAULT_MAX_TOKENS},
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
    """Per (arm, domain) counts from episodes."""
    rules = load_rules()
    summaries: dict[tuple[str, str], ArmDomainSummary] = {}
    for episode in episodes:
        key = (episode.arm, episode.domain)
        s = summaries.setdefault(
            key,
            ArmDomainSummary(
                arm=episode.arm,
                domain=episode.domain,
                episodes=0,
                succeeded=0,
                agent_calls=0,
                failed_calls=0,
                malformed=0,
                channels=dict.fromkeys(LEAF_CHANNELS, 0),
            ),
        )
        facts = episode_facts(episode, rules)
        s.episodes += 1
        s.succeeded += facts.succeeded
        s.agent_calls += facts.agent_calls
        s.failed_calls += facts.agent_failed
        s.malformed += facts.malformed
        for channel, n in facts.channels.items():
            s.channels[channel] = s.channels.get(channel, 0) + n
        terms = Counter(s.terminations)
        terms[facts.termination] += 1
        s.terminations = dict(terms)
    return [summaries[k] for k in sorted(summaries)]
