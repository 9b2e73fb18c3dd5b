"""Training data for the embedded agent: oracle episodes on the TRAIN split of both built-in
domains, run with the real runner and the scripted user (phrasing varied by seed).

The episodes take the product's run path (docs/architecture.md, "Training data"): a plan of
`EpisodeJob`s (`plan_examples`: one per task and user-phrasing variant, with the agent
`slip-oracle` and its per-example mistake and detour settings as options), run by the local
executor in one event loop (`run_job` → `run_episode`), then turned into examples
(`example_from`) in the plan's order.

A share of the episodes contain one planted mistake followed by its recovery, so the model
sees how to recover: a failed call of one of the analysis' channels (role confusion, a
near-miss or invented name, text in the name slot, bad arguments, a record that does not
exist, a refused precondition; `flatscore.agents.mistakes`), then the corrected call or a
clarifying question. The environment answers the mistake with its real error text. Planted
mistakes exist ONLY here: evaluation never plants anything, every failure at test time is
the model's own.

Loss is on agent tokens only: the chat-format agent spans (`render(...).agent_spans`) of the
agent's own turns, minus the runner's fixed greeting and minus the planted mistakes (which
the model must learn to recover from, not to make).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from flatscore import defaults
from flatscore.agents.base import register_agent
from flatscore.agents.mistakes import MISTAKE_CHANNELS, Mistake, plant
from flatscore.agents.oracle import OracleAgent, ask_text, oracle_plan
from flatscore.domains import get_domain
from flatscore.domains.framework import Task
from flatscore.episode import Episode, ErrorBudget, Message
from flatscore.models.chat_format import encode_conversation, render
from flatscore.run.episode_loop import GREETING
from flatscore.run.executors import AgentRecipe, EpisodeJob, LocalExecutor
from flatscore.run.views import agent_view
from flatscore.study import UserSpec
from flatscore.train.recipe import TrainConfig

DOMAINS = ("retail", "telecom")
STUDY = "train-embedded"
TRAIN_AGENT = "slip-oracle"

EMAIL = ["email"]
NAME_ZIP = ["first_name", "last_name", "zip"]


def detour_plan(plan: list[Message]) -> list[Message]:
    """The plan with the identification asked the other way first (the agent cannot know
    which the user remembers): an email user is asked for name + zip and offers the email
    instead; a name + zip user is first asked for the email and says they don't remember
    it. Not a mistake (no call fails): a conversation the model must be able to follow."""
    out = list(plan)
    for i, message in enumerate(out):
        if message.content == ask_text(EMAIL):
            out[i] = Message(role="assistant", content=ask_text(NAME_ZIP))
            return out
        if message.content == ask_text(NAME_ZIP):
            out.insert(i, Message(role="assistant", content=ask_text(EMAIL)))
            return out
    return out


@dataclass(frozen=True)
class MistakeMix:
    """How many mistakes a mistake conversation holds and how they look. The defaults are
    the first recovery data's (one mistake, made once, the original candidate kinds)."""

    most: int = 1  # 1..most mistakes per conversation, uniformly
    repeat_share: float = 0.0  # chance a mistake's failing call is made twice
    natural: bool = False  # add the kinds the reference made on its own (mistakes.plant)


def mistake_mix(config: TrainConfig) -> MistakeMix:
    """The recipe's mistake mix (`mistakes_most`, `repeat_share`, `natural_mistakes`)."""
    return MistakeMix(config.mistakes_most, config.repeat_share, config.natural_mistakes)


class SlipOracle(OracleAgent):
    """The oracle, optionally with the identification detour (`detour_plan`) and with
    planted mistakes (`flatscore.agents.mistakes.plant`: a channel drawn uniformly among
    those the task allows) each followed by its recovery. Training data only: registered as
    `slip-oracle` when this module is imported (not one of the built-in agents), so the
    executor builds it from a job like any agent; what it planted goes to the episode's
    metadata (`episode_metadata`)."""

    name = "oracle"

    def __init__(
        self,
        mistake_seed: int | None = None,
        detour: bool = False,
        channels: tuple[str, ...] = MISTAKE_CHANNELS,
        mix: MistakeMix = MistakeMix(),
    ) -> None:
        super().__init__()
        self.mistake_seed = mistake_seed
        self.detour = detour
        self.channels = channels
        self.mix = mix
        self.detoured = False  # whether the detour changed this episode's plan
        self.mistakes: list[Mistake] = []

    @property
    def mistake(self) -> Mistake | None:
        return self.mistakes[0] if self.mistakes else None

    def start(self, task: Task, seed: int) -> None:
        super().start(task, seed)
        self.mistakes = []
        if self.mistake_seed is not None:
            rng = random.Random(f"mistake|{self.mistake_seed}|{task.domain}|{task.id}")
            # counts and repeats from their own stream, so the default mix draws exactly
            # what the first recovery data drew
            mix_rng = random.Random(f"mix|{self.mistake_seed}|{task.domain}|{task.id}")
            count = mix_rng.randint(1, self.mix.most) if self.mix.most > 1 else 1
            planted = plant(
                get_domain(task.domain), task, rng, self.channels, count, self.mix.natural
            )
            self.mistakes = [
                replace(m, repeat=2)
                if self.mix.repeat_share > 0 and mix_rng.random() < self.mix.repeat_share
                else m
                for m in planted
            ]
            if self.mistakes:
                self._plan = oracle_plan(task, mistakes=tuple(self.mistakes))
        self.detoured = False
        if self.detour:
            plan = detour_plan(self._plan)
            self.detoured = plan != self._plan
            self._plan = plan

    def episode_metadata(self) -> dict[str, Any]:
        """What `example_from` needs: the planted channels, how many calls they make (a
        repeated mistake fails twice), and whether the detour changed the plan."""
        return {
            "planted": [m.channel for m in self.mistakes],
            "planted_calls": sum(m.repeat for m in self.mistakes),
            "detoured": self.detoured,
        }


register_agent(TRAIN_AGENT, SlipOracle)


@dataclass
class Example:
    """One training conversation: the agent's view, its tool schemas, and which agent
    messages carry loss (indices into `messages`)."""

    domain: str
    task_id: str
    seed: int
    mistake: str | None  # the planted channels in order, joined by "+"
    detour: bool
    messages: list[Message]
    tools: list[dict[str, Any]]
    trained: list[int]


def failed_call_ids(episode: Episode) -> set[str]:
    return {
        m.tool_result.call_id
        for m in episode.messages
        if m.tool_result is not None and m.tool_result.error
    }


def trained_messages(view: list[Message], failed: set[str]) -> list[int]:
    """Agent turns that carry loss: every assistant turn except the fixed greeting and
    any turn with a call that failed (a planted mistake)."""
    out = []
    for i, m in enumerate(view):
        if m.role != "assistant":
            continue
        if i == 1 and m.content == GREETING and not m.tool_calls:
            continue
        if any(c.id in failed for c in m.tool_calls):
            continue
        out.append(i)
    return out


def example_job(
    task: Task,
    seed: int,
    *,
    with_mistake: bool,
    detour: bool = False,
    mix: MistakeMix = MistakeMix(),
    variant: int = 0,
) -> EpisodeJob:
    """The job of one training episode: the slip oracle (planting with `seed` when
    `with_mistake`) against the scripted user with phrasing seed `seed`, under the run
    defaults' step limit and error budget; `variant` is its trial (unique episode ids)."""
    options = {"mistake_seed": seed if with_mistake else None, "detour": detour, "mix": mix}
    return EpisodeJob(
        run=STUDY,
        study=STUDY,
        arm="oracle",
        domain=task.domain,
        task_id=task.id,
        trial=variant,
        seed=seed,
        max_steps=defaults.MAX_STEPS,
        error_budget=ErrorBudget(max_errors=defaults.MAX_ERRORS, counted=defaults.COUNTED),
        agent=AgentRecipe(label="oracle", agent=TRAIN_AGENT, options=options),
        user=UserSpec(kind="scripted"),
    )


async def _collect(jobs: Sequence[EpisodeJob], concurrency: int) -> dict[str, Episode]:
    return {e.episode_id: e async for e in LocalExecutor(concurrency).map(jobs)}


def run_jobs(jobs: Sequence[EpisodeJob], concurrency: int = defaults.CONCURRENCY) -> list[Episode]:
    """The jobs' episodes, in the jobs' order: the local executor, one event loop. The
    episodes do not depend on the concurrency (each has its own agent, user, environment
    and seeded draws)."""
    episodes = asyncio.run(_collect(jobs, concurrency))
    return [episodes[job.episode_id] for job in jobs]


def example_from(job: EpisodeJob, episode: Episode) -> Example | None:
    """The example of `job`'s finished episode. None when the episode did not succeed or
    the planted calls are not exactly the calls that failed (so every example is a clean
    demonstration)."""
    with_mistake = job.agent.options["mistake_seed"] is not None
    failed = failed_call_ids(episode)
    if not episode.succeeded:
        return None
    planted: list[str] = episode.metadata["planted"]
    if with_mistake and (not planted or len(failed) != episode.metadata["planted_calls"]):
        return None
    if not with_mistake and failed:
        return None
    domain = get_domain(episode.domain)
    view = agent_view(episode.messages, domain.policy)
    # The tokens after the last agent turn carry no loss: drop them.
    trained = trained_messages(view, failed)
    view = view[: trained[-1] + 1]
    return Example(
        domain=episode.domain,
        task_id=episode.task_id,
        seed=job.seed,
        mistake="+".join(planted) if with_mistake else None,
        detour=episode.metadata["detoured"],
        messages=view,
        tools=domain.agent_tool_schemas(),
        trained=trained,
    )


def make_example(job: EpisodeJob) -> Example | None:
    """Run one training job (`example_job`) through the executor and turn its episode into
    an example (`example_from`)."""
    [episode] = run_jobs([job])
    return example_from(job, episode)


def build_examples(config: TrainConfig) -> list[Example]:
    """The examples of `config`'s training data (`plan_examples`), in the plan's order;
    deterministic."""
    jobs = plan_examples(config)
    examples = []
    for job, episode in zip(jobs, run_jobs(jobs), strict=True):
        ex = example_from(job, episode)
        if ex is not None:
            examples.append(ex)
    return examples


def plan_examples(config: TrainConfig) -> list[EpisodeJob]:
    """The training data's plan: one job per (domain, train task, variant), in that order.
    `config.variants` episodes per train task (scripted-user seeds `data_seed*1000 + v`);
    a seeded `mistake_share` of them with planted mistakes (`mistake_mix`) and
    `detour_share` with the identification detour (where the task asks for
    identification)."""
    rng = random.Random(f"examples|{config.data_seed}")
    mix = mistake_mix(config)
    jobs = []
    for name in config.domains:
        for task in get_domain(name).tasks("train"):
            for v in range(config.variants):
                mistake = rng.random() < config.mistake_share
                detour = rng.random() < config.detour_share
                jobs.append(
                    example_job(
                        task,
                        config.data_seed * 1000 + v,
                        with_mistake=mistake,
                        detour=detour,
                        mix=mix,
                        variant=v,
                    )
                )
    return jobs


@dataclass
class Tokenized:
    ids: list[int]
    labels_mask: list[bool]  # True where the token is an agent token with loss


def tokenize(example: Example, tokenizer: Any) -> Tokenized:
    """Token ids of the rendered conversation and the mask of trained agent tokens: exactly
    the tokens whose characters start inside a trained agent span."""
    rendered = render(example.messages, example.tools, add_generation_prompt=False)
    spans = [s for s in rendered.agent_spans if s.message_index in set(example.trained)]
    enc = encode_conversation(tokenizer, rendered.text, offsets=True)
    mask = []
    j = 0
    for start, _end in enc["offset_mapping"]:
        while j < len(spans) and spans[j].end <= start:
            j += 1
        mask.append(j < len(spans) and spans[j].start <= start < spans[j].end)
    return Tokenized(ids=list(enc["input_ids"]), labels_mask=mask)
