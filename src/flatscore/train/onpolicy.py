"""On-policy recovery data (DAgger-style): the trained reference's own failed states on the
train split, each followed by what the oracle would do from there.

1. **Rollouts**: the reference (the base + the source adapter, at the recipe's sampling) runs
   the train split as a study run by the product's driver and executor
   (`rollout_study`, `run_rollouts`): run files under `<out>/rollouts/`, resumable.
2. **States**: every agent turn with a failed call is a state (`failed_states`): the
   transcript through that turn's tool results. Loops (a failed call repeating the
   previous failed call) and re-issues (a call that had already succeeded) are states like
   any other; they are flagged as the analysis flags them (`flatscore.analysis.facts.loops`).
3. **Labels**: the world at the state is rebuilt by replaying the transcript's calls on a
   fresh environment (`flatscore.agents.oracle.replay_world`), and the oracle's next turn from there
   (`flatscore.agents.oracle.oracle_next_turn`) is the label: the corrected call, the
   read or question that must come first, the user's action, or the final message. Off
   the gold path (a wrong write succeeded) the oracle goes on with the first gold action
   not yet made, if it still succeeds there (`off_path: continue`); a state where none
   does has no label and is counted, not kept.
4. **Examples**: the agent's view of the state + the label, with loss on the label only:
   the agent's own turns (its failed calls above all) stay in the context without loss.
   Mixed with a seeded sample of the recipe's planted data (`earlier_share`), in a fixed
   order, so the data and its digest do not depend on how the rollouts were run or resumed.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flatscore.agents.oracle import gold_progress, oracle_next_turn, replay_world
from flatscore.analysis.facts import call_key
from flatscore.domains import get_domain
from flatscore.domains.framework import Task
from flatscore.episode import Episode, Message
from flatscore.errors import InputError
from flatscore.run.driver import RUNS_DIR, run_study
from flatscore.run.study import parse_study
from flatscore.run.views import agent_view
from flatscore.store.jsonl import read_episodes
from flatscore.study import Study
from flatscore.train.data import Example, build_examples, tokenize
from flatscore.train.recipe import OnPolicy, TrainConfig

ROLLOUTS = "rollouts"
STUDY_NAME = "onpolicy"
MODEL_LABEL = "reference"
REFERENCE_ARM = "ref"
PLANTED_ARM = "ref-planted"
SUMMARY = "onpolicy.json"


# --------------------------------------------------------------------------- rollouts


def rollout_study(
    config: TrainConfig,
    source: Path,
    out: Path,
    *,
    threads: int = 1,
    concurrency: int = 16,
    kv_memory_mb: float = 1536.0,
    model: dict[str, Any] | None = None,
) -> Study:
    """The rollouts as a study: the base + `source` (the adapter the recipe pins) as one
    `ref` arm on the recipe's split and domains, `trials` episodes per task with seeds
    `seed + trial` (the studies' scheme), the recipe's sampling, the scripted user, the
    recipe's step limit and error budget; output `<out>/rollouts`. With `inject`, a second
    arm `ref-planted` plays the same weights with that damage planted in its calls. `model`
    replaces the study's model entry, but not its arms (another agent playing the
    reference, e.g. a scripted one)."""
    policy = on_policy(config)
    arms: dict[str, Any] = {REFERENCE_ARM: {}}
    if policy.inject is not None:
        arms[PLANTED_ARM] = {"inject": {"base": REFERENCE_ARM, **policy.inject.model_dump()}}
    reference = model or {
        "kind": "local",
        "path": config.base,
        "adapter": str(source.resolve()),
        "threads": threads,
        "kv_memory_mb": kv_memory_mb,
        "private_prefix": True,
        "sampling": {
            "temperature": policy.temperature,
            "top_p": policy.top_p,
            "max_tokens": policy.max_tokens,
        },
    }
    return parse_study(
        {
            "name": STUDY_NAME,
            "output": str((out / ROLLOUTS).resolve()),
            "models": [{"name": MODEL_LABEL, **reference, "arms": arms}],
            "domains": list(config.domains),
            "split": policy.split,
            "tasks_per_domain": policy.tasks_per_domain,
            "trials": policy.trials,
            "order": "trial",
            "seed": policy.seed,
            "max_steps": policy.max_steps,
            "user": {"kind": "scripted"},
            "error_budget": {"max_errors": policy.max_errors, "counted": "all"},
            "repair": "off",
            "concurrency": concurrency,
        }
    )


def run_rollouts(study: Study, *, progress: bool = True) -> Path:
    """Run (or finish: resumable) the rollouts; their run files' folder. The reference's
    backend is released afterwards (training loads its own copy of the weights)."""
    from flatscore.models.shared import clear_backends

    run_study(study, resume=True, progress=progress, report=False)
    clear_backends()
    return study.output_dir / RUNS_DIR


def on_policy(config: TrainConfig) -> OnPolicy:
    if config.on_policy is None:
        raise InputError("the recipe has no on_policy section", field="on_policy")
    return config.on_policy


# --------------------------------------------------------------------------- states


@dataclass(frozen=True)
class FailedState:
    """An agent turn with a failed call: `messages[:end]` is the transcript through the
    turn's tool results."""

    end: int
    calls: int
    """Agent calls answered before this turn (the turn's first call's place)."""
    repeat: bool
    """A failed call of the turn repeats the previous answered agent call, which failed
    with the same name and arguments (the analysis' repeat)."""
    reissue: bool
    """A failed call of the turn has the name and arguments of an earlier call that
    succeeded (the analysis' re-issue, of those that failed)."""
    error_kinds: tuple[str, ...]
    planted: bool = False
    """A failed call of the turn had damage planted in it (an inject arm's rollouts)."""


def failed_states(
    messages: Sequence[Message], planted_ids: Collection[str] = ()
) -> list[FailedState]:
    """Every agent turn with a failed call, in order (see `FailedState`); unanswered calls
    (an episode cut mid-turn) count for nothing, as in the analysis. `planted_ids`: the
    calls with damage planted in them (`planted_calls`)."""
    results = {
        (m.tool_result.requestor, m.tool_result.call_id): (i, m.tool_result)
        for i, m in enumerate(messages)
        if m.tool_result is not None
    }
    states = []
    previous: tuple[str, bool] | None = None  # the last answered agent call: key, failed
    succeeded: set[str] = set()
    answered = 0
    for i, m in enumerate(messages):
        if m.role != "assistant" or not m.tool_calls:
            continue
        end, repeat, reissue, kinds, first = i + 1, False, False, [], answered
        planted = False
        for call in m.tool_calls:
            found = results.get((call.requestor, call.id))
            if found is None:
                continue
            where, result = found
            end = max(end, where + 1)
            key = call_key(call.name, call.arguments)
            if result.error:
                kinds.append(result.error_kind or "other")
                repeat |= previous == (key, True)
                reissue |= key in succeeded
                planted |= call.id in planted_ids
            else:
                succeeded.add(key)
            previous = (key, result.error)
            answered += 1
        if kinds:
            states.append(FailedState(end, first, repeat, reissue, tuple(kinds), planted))
    return states


def planted_calls(episode: Episode) -> set[str]:
    """The ids of the calls an inject arm planted damage in (`metadata["injected"]`)."""
    injected = episode.metadata.get("injected") or {}
    return {change["call_id"] for change in injected.get("changes", [])}


# --------------------------------------------------------------------------- examples


@dataclass
class StateExample:
    """One on-policy example and where it came from."""

    example: Example
    episode_id: str
    trial: int
    state: FailedState
    label: str  # call | ask | instruction | final | closing


def label_kind(label: Message, task: Task) -> str:
    if label.tool_calls:
        return "call"
    text = label.content or ""
    if text == task.final_message:
        return "final"
    if text.rstrip().endswith("?") and "Could you please give me" in text:
        return "ask"
    if text.startswith("Is there anything else"):
        return "closing"
    return "instruction"


@dataclass
class Tally:
    """What the states of the rollouts became."""

    episodes: int = 0
    episodes_with_failure: int = 0
    states: int = 0
    repeats: int = 0
    reissues: int = 0
    off_path: int = 0
    """States whose world is on no prefix of the gold solution (a wrong write succeeded)."""
    unlabelled: int = 0
    """States with no gold action the oracle can do (dropped)."""
    planted: int = 0
    """States whose failed calls include a planted one (an inject arm's rollouts)."""
    before_plant: int = 0
    """An inject arm's states before its first planted call (left out: the reference's)."""
    labels: Counter[str] = field(default_factory=Counter)

    def as_dict(self) -> dict[str, Any]:
        return {
            "episodes": self.episodes,
            "episodes_with_failure": self.episodes_with_failure,
            "states": self.states,
            "repeat_states": self.repeats,
            "reissue_states": self.reissues,
            "off_path": self.off_path,
            "unlabelled": self.unlabelled,
            **({"planted_states": self.planted} if self.planted else {}),
            **({"before_plant_left_out": self.before_plant} if self.before_plant else {}),
            "labels": dict(sorted(self.labels.items())),
        }


def episode_examples(
    episode: Episode, tally: Tally | None = None, *, off_path: bool = True
) -> list[StateExample]:
    """The labelled failed states of one episode, in order (`off_path`: label the states
    off the gold path too, `flatscore.agents.oracle.next_gold_step`). In an inject arm's
    episode, only the states from its first planted call on: before it, the episode is the
    reference's own with the same seed, whose states the `ref` arm's episode already holds."""
    tally = tally if tally is not None else Tally()
    domain = get_domain(episode.domain)
    task = domain.task(episode.task_id)
    planted = planted_calls(episode)
    states = failed_states(episode.messages, planted)
    if "injected" in episode.metadata:
        first = next(
            (i for i, m in enumerate(episode.messages) if {c.id for c in m.tool_calls} & planted),
            len(episode.messages),
        )
        kept = [s for s in states if s.end > first]
        tally.before_plant += len(states) - len(kept)
        states = kept
    tally.episodes += 1
    tally.episodes_with_failure += bool(states)
    out = []
    for state in states:
        tally.states += 1
        tally.repeats += state.repeat
        tally.reissues += state.reissue
        tally.planted += state.planted
        prefix = episode.messages[: state.end]
        tally.off_path += gold_progress(task, replay_world(task, prefix)) is None
        label = oracle_next_turn(task, prefix, off_path=off_path)
        if label is None:
            tally.unlabelled += 1
            continue
        kind = label_kind(label, task)
        tally.labels[kind] += 1
        view = [*agent_view(prefix, domain.policy), label]
        example = Example(
            domain=episode.domain,
            task_id=episode.task_id,
            seed=episode.seed or 0,
            mistake=None,
            detour=False,
            messages=view,
            tools=domain.agent_tool_schemas(),
            trained=[len(view) - 1],
        )
        out.append(StateExample(example, episode.episode_id, episode.trial, state, kind))
    return out


def rollout_episodes(runs: Path) -> list[Episode]:
    """The finished episodes of the rollouts' run files, one per episode id (the last
    attempt), infrastructure errors left out, in a fixed order: domain, the task's place in
    its split, trial, arm — not the order they finished in."""
    files = sorted(runs.glob("*.jsonl"))
    if not files:
        raise InputError("holds no run files (*.jsonl)", file=str(runs))
    latest: dict[str, Episode] = {}
    for path in files:
        for episode in read_episodes(path):
            latest[episode.episode_id] = episode
    kept = [e for e in latest.values() if not e.is_infrastructure_error]
    place = {
        (d, t.id): i for d in {e.domain for e in kept} for i, t in enumerate(get_domain(d).tasks())
    }
    return sorted(kept, key=lambda e: (e.domain, place[(e.domain, e.task_id)], e.trial, e.arm))


def mix(
    onpolicy: Sequence[dict[str, Any]],
    earlier: Sequence[dict[str, Any]],
    share: float,
    seed: int,
) -> list[dict[str, Any]]:
    """The on-policy records + a seeded sample of the earlier records making `share` of
    the whole (as near as whole conversations allow; all of them if there are too few),
    in their own orders (training draws its own order)."""
    if share <= 0 or not earlier:
        return list(onpolicy)
    wanted = round(len(onpolicy) * share / (1 - share))
    picked = sorted(
        random.Random(f"mix|{seed}").sample(range(len(earlier)), min(wanted, len(earlier)))
    )
    return [*onpolicy, *(earlier[i] for i in picked)]


def record(
    example: Example, tokenizer: Any, max_tokens: int, extra: dict[str, Any]
) -> dict[str, Any] | None:
    """A dataset record (`flatscore.train.train.load_dataset`'s fields + `extra`); None when
    no trained token is left within `max_tokens` (the label was cut)."""
    tok = tokenize(example, tokenizer)
    ids, mask = tok.ids[:max_tokens], tok.labels_mask[:max_tokens]
    if not any(mask[1:]):
        return None
    return {
        "domain": example.domain,
        "task_id": example.task_id,
        "seed": example.seed,
        "mistake": example.mistake,
        "detour": example.detour,
        **extra,
        "ids": ids,
        "mask": mask,
    }


def onpolicy_records(
    config: TrainConfig,
    runs: Path,
    tokenizer: Any,
    *,
    earlier: Iterable[Example] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The stage's dataset records and its summary: the labelled states of the rollouts in
    `runs`, then the sample of the recipe's planted data (`build_examples(config)`, or
    `earlier`) that makes `earlier_share` of the whole."""
    policy = on_policy(config)
    tally = Tally()
    records = []
    too_long = 0
    for episode in rollout_episodes(runs):
        for item in episode_examples(episode, tally, off_path=policy.off_path == "continue"):
            state = item.state
            rec = record(
                item.example,
                tokenizer,
                config.max_tokens,
                {
                    "onpolicy": {
                        "episode_id": item.episode_id,
                        "trial": item.trial,
                        "calls_before": state.calls,
                        "repeat": state.repeat,
                        "reissue": state.reissue,
                        "errors": list(state.error_kinds),
                        "label": item.label,
                        **({"planted": True} if state.planted else {}),
                    }
                },
            )
            if rec is None:
                too_long += 1
            else:
                records.append(rec)
    planted: list[dict[str, Any]] = []
    if policy.earlier_share > 0:
        examples = build_examples(config) if earlier is None else list(earlier)
        for ex in examples:
            rec = record(ex, tokenizer, config.max_tokens, {})
            if rec is not None:
                planted.append(rec)
    data = mix(records, planted, policy.earlier_share, config.data_seed)
    summary = {
        **tally.as_dict(),
        "cut_at_max_tokens": too_long,
        "onpolicy_records": len(records),
        "earlier_records": len(data) - len(records),
        "earlier_available": len(planted),
    }
    return data, summary


def write_summary(out: Path, summary: dict[str, Any]) -> None:
    (out / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
