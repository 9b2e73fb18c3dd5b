"""On-policy recovery data: the oracle's next turn from any state is the oracle's own turn;
an agent that fails in known ways (a wrong call made three times, a write re-issued after
it succeeded) yields exactly those failed states, flagged as the analysis flags them, each
labelled with the turn the oracle makes next; only the label carries loss; the data and
its digest do not depend on reruns or on a resumed rollout."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from flatscore.agents.base import register_agent
from flatscore.agents.oracle import (
    CLOSING,
    OracleAgent,
    ask_text,
    gold_progress,
    oracle_next_turn,
    replay_world,
)
from flatscore.analysis.channels import load_rules
from flatscore.analysis.facts import episode_facts
from flatscore.domains import get_domain
from flatscore.episode import Message, ToolCall
from flatscore.errors import InputError
from flatscore.models.chat_format import render
from flatscore.run.driver import RUNS_DIR
from flatscore.store.jsonl import read_episodes
from flatscore.train.data import example_job, run_jobs, tokenize
from flatscore.train.onpolicy import (
    ROLLOUTS,
    Tally,
    episode_examples,
    failed_states,
    mix,
    onpolicy_records,
    rollout_episodes,
    rollout_study,
    run_rollouts,
)
from flatscore.train.recipe import OnPolicy, TrainConfig, load_recipe
from flatscore.train.train import RunOptions, rollout_source

WRONG = "X0000"
ROOT = Path(__file__).resolve().parents[2]


class FailingOracle(OracleAgent):
    """The oracle with known failures: before the first gold agent call that takes
    arguments, that call with every string argument replaced by `WRONG`, `loops` times
    (a loop from the second on); after the last gold agent write, that write again (it had
    succeeded). Injected calls have ids ending in `_bad`."""

    name = "failing-oracle"

    def __init__(self, loops: int = 3) -> None:
        super().__init__()
        self.loops = loops

    def start(self, task: Any, seed: int) -> None:
        super().start(task, seed)
        domain = get_domain(task.domain)
        agent = [i for i, a in enumerate(task.actions) if a.requestor == "agent" and a.arguments]
        writes = [i for i in agent if domain.tool_kind(task.actions[i]) == "write"]
        plan: list[Message] = []
        for message in self._plan:
            ids = [c.id for c in message.tool_calls]
            if agent and f"call_{agent[0]}" in ids:
                gold = message.tool_calls[0]
                args = {k: WRONG if isinstance(v, str) else v for k, v in gold.arguments.items()}
                for n in range(self.loops):
                    bad = ToolCall(id=f"call_{n}_bad", name=gold.name, arguments=args)
                    plan.append(Message(role="assistant", tool_calls=[bad]))
            plan.append(message)
            if writes and f"call_{writes[-1]}" in ids:
                again = message.tool_calls[0].model_copy(update={"id": "call_again_bad"})
                plan.append(Message(role="assistant", tool_calls=[again]))
        self._plan = plan


register_agent("failing-oracle", FailingOracle)

SOURCE_SHA = "0" * 64
CONFIG = TrainConfig(
    domains=("retail",),
    max_tokens=4096,
    on_policy=OnPolicy(source_adapter_sha256=SOURCE_SHA, trials=1, earlier_share=0.0),
)
AGENT = {"kind": "agent", "agent": "failing-oracle", "arms": ["ref"]}


TEMPLATES = {t.template: t.id for t in reversed(get_domain("retail").tasks("train"))}
"""One train task of each retail template (9)."""


def _rollouts(out: Path) -> Path:
    study = rollout_study(CONFIG, out, out, model=AGENT, concurrency=4)
    study = study.model_copy(update={"task_ids": sorted(TEMPLATES.values())})
    return run_rollouts(study, progress=False)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _rollouts(tmp_path_factory.mktemp("onpolicy"))


def _turn(m: Message) -> tuple[str | None, list[tuple[str, Any]]]:
    return m.content, [(c.name, c.arguments) for c in m.tool_calls]


# --------------------------------------------------------------------------- the oracle


@pytest.mark.parametrize("domain", ["retail", "telecom"])
def test_from_any_state_of_its_own_episodes_the_oracle_makes_its_next_turn(domain: str) -> None:
    """Known answer: at every agent turn of plain oracle episodes (every 7th train task;
    every task: the slow test below),
    the oracle computed from the transcript and the replayed world is the turn it made."""
    tasks = get_domain(domain).tasks("train")[::7]
    jobs = [example_job(t, 5, with_mistake=False) for t in tasks]
    turns = 0
    for episode in run_jobs(jobs):
        assert episode.succeeded
        task = get_domain(domain).task(episode.task_id)
        for i, m in enumerate(episode.messages[1:], 1):  # after the runner's greeting
            if m.role != "assistant":
                continue
            prefix = episode.messages[:i]
            label = oracle_next_turn(task, prefix)
            assert label is not None and _turn(label) == _turn(m), (episode.task_id, i)
            turns += 1
    assert turns > 3 * len(tasks)


def _transcript(task: Any, calls: list[tuple[str, dict[str, Any]]]) -> list[Message]:
    """The greeting, the user's request and everything they know, then `calls` made by
    the agent one per turn, answered by a fresh world."""
    env = get_domain(task.domain).new_environment(task)
    said = " ".join(task.scenario.known_info.values())
    messages = [
        Message(role="assistant", content="Hi! How can I help you today?"),
        Message(role="user", content=f"{task.scenario.requests[0]} {said}"),
    ]
    for n, (name, arguments) in enumerate(calls):
        call = ToolCall(id=f"c{n}", name=name, arguments=arguments)
        messages += [
            Message(role="assistant", tool_calls=[call]),
            Message(role="tool", tool_result=env.execute(call)),
        ]
    return messages


def _gold(task: Any, *steps: int) -> list[tuple[str, dict[str, Any]]]:
    return [(task.actions[i].name, task.actions[i].arguments) for i in steps]


def test_off_the_gold_path_the_oracle_goes_on_where_it_still_can() -> None:
    """A wrong write that succeeded puts the world off the gold path. Known answers: a
    line moved to the wrong plan, then that move re-issued (a loop on a failing call):
    the oracle moves it to the task's plan (which brings the world back to the gold
    one); an order cancelled for the wrong reason: the task's cancellation cannot be made
    any more, so there is no turn (`off_path=False`: none either way)."""
    plan_task = next(t for t in get_domain("telecom").tasks("train") if t.template == "change_plan")
    line, gold_plan = plan_task.actions[-1].arguments.values()
    now = get_domain("telecom").new_environment(plan_task).db.lines[line].plan_id
    other = next(p for p in ("P1", "P2", "P3", "P4") if p not in (now, gold_plan))
    wrong = ("change_plan", {"line_id": line, "plan_id": other})
    messages = _transcript(plan_task, [*_gold(plan_task, 0, 1), wrong, wrong])
    [*_, moved, _, again] = messages
    assert not moved.tool_result.error and again.tool_result.error  # type: ignore[union-attr]
    assert gold_progress(plan_task, replay_world(plan_task, messages)) is None
    label = oracle_next_turn(plan_task, messages)
    assert label is not None and _turn(label) == (None, _gold(plan_task, 2))
    assert oracle_next_turn(plan_task, messages, off_path=False) is None

    task = next(t for t in get_domain("retail").tasks("train") if t.template == "cancel")
    gold = task.actions[-1].arguments
    other = next(r for r in ("no longer needed", "ordered by mistake") if r != gold["reason"])
    cancelled = ("cancel_order", {"order_id": gold["order_id"], "reason": other})
    messages = _transcript(task, [*_gold(task, 0, 1), cancelled])
    assert gold_progress(task, replay_world(task, messages)) is None
    assert oracle_next_turn(task, messages) is None  # cancelling again fails
    # before the lookups were made, the oracle can still make them
    early = _transcript(task, [cancelled])
    label = oracle_next_turn(task, early)
    assert label is not None and _turn(label) == (None, _gold(task, 0))


def test_the_oracle_asks_first_when_the_user_has_not_said_the_value() -> None:
    """A hallucinated lookup before the user identified themselves: the oracle asks for
    what the task says it must (after `I could not find that.`, the record being unknown),
    and once the user has said it, makes the lookup."""
    task = next(t for t in get_domain("retail").tasks("train") if t.template == "cancel")
    domain = get_domain("retail")
    lookup = task.actions[0]
    bad = ToolCall(id="c1", name=lookup.name, arguments=dict.fromkeys(lookup.arguments, "nobody"))
    messages = [
        Message(role="assistant", content="Hi! How can I help you today?"),
        Message(role="user", content=task.scenario.requests[0]),
        Message(role="assistant", tool_calls=[bad]),
    ]
    result = domain.new_environment(task).execute(bad)
    assert result.error and result.error_kind == "entity_not_found"
    messages.append(Message(role="tool", tool_result=result))
    label = oracle_next_turn(task, messages)
    assert label is not None
    assert label.content == f"I could not find that. {ask_text(task.asks[0].keys)}"
    said = " ".join(task.scenario.known_info[k] for k in task.asks[0].keys)
    messages.append(Message(role="user", content=said))
    label = oracle_next_turn(task, messages)
    assert label is not None and _turn(label) == (
        None,
        [(task.actions[0].name, task.actions[0].arguments)],
    )


def test_after_everything_is_done_the_oracle_says_the_final_message_once() -> None:
    task = next(t for t in get_domain("retail").tasks("train") if t.template == "cancel")
    [episode] = run_jobs([example_job(task, 0, with_mistake=False)])
    done = episode.messages  # ends with the final message
    assert oracle_next_turn(task, done) == Message(role="assistant", content=CLOSING)
    before = [m for m in done if m.content != task.final_message]
    label = oracle_next_turn(task, before)
    assert label is not None and label.content == task.final_message


# --------------------------------------------------------------------------- states


def test_rollouts_run_through_the_driver_with_the_studys_seeds(runs: Path) -> None:
    episodes = rollout_episodes(runs)
    assert len(episodes) == len(TEMPLATES) == 9
    assert {e.seed for e in episodes} == {CONFIG.on_policy.seed}  # type: ignore[union-attr]
    assert {e.split for e in episodes} == {"train"}
    assert json.loads((runs.parent / "study.json").read_text())["split"] == "train"


def test_failed_states_are_found_and_flagged_as_the_analysis_flags_them(runs: Path) -> None:
    rules = load_rules()
    repeats = reissues = 0
    for episode in rollout_episodes(runs):
        states = failed_states(episode.messages)
        facts = episode_facts(episode, rules)
        injected = sum(c.id.endswith("_bad") for m in episode.messages for c in m.tool_calls)
        failed = [s for s in states]
        # every injected call failed, and nothing else did
        assert facts.agent_failed == len(failed) <= injected
        assert sum(s.repeat for s in states) == facts.repeats
        assert sum(s.reissue for s in states) == facts.reissued_failed
        repeats += facts.repeats
        reissues += facts.reissued_failed
    assert repeats == 2 * 9  # three wrong calls per episode: two loop states each
    assert reissues >= 5  # the writes that fail when made again (cancel, return, ...)


def test_each_failed_state_is_labelled_with_the_oracles_next_turn(runs: Path) -> None:
    """Known answer: the failing oracle's next turn that is not an injected failure is
    the oracle's turn from that state — the corrected call after the wrong ones (also
    after a loop), the next step or the final message after the re-issued write."""
    kinds: set[str] = set()
    checked = 0
    for episode in rollout_episodes(runs):
        items = episode_examples(episode)
        assert len(items) == len(failed_states(episode.messages))  # all on the gold path
        for item in items:
            after = episode.messages[item.state.end :]
            expected = next(
                m
                for m in after
                if m.role == "assistant" and not any(c.id.endswith("_bad") for c in m.tool_calls)
            )
            assert _turn(item.example.messages[-1]) == _turn(expected)
            kinds.add(item.label)
            checked += 1
        assert episode.succeeded  # the injected failures changed nothing in the world
    assert {"call", "final"} <= kinds
    assert checked >= 3 * 9


def test_only_the_label_carries_loss(runs: Path, tokenizer: Any) -> None:
    episode = rollout_episodes(runs)[0]
    items = episode_examples(episode)
    loop = next(i for i in items if i.state.repeat)
    example = loop.example
    # the context holds the agent's own failed calls (the loop), none of them trained
    failed = [m for m in example.messages if m.role == "tool" and m.tool_result.error]  # type: ignore[union-attr]
    assert len(failed) >= 2
    assert example.trained == [len(example.messages) - 1]
    tok = tokenize(example, tokenizer)
    trained = "".join(
        tokenizer.decode([i]) for i, m in zip(tok.ids, tok.labels_mask, strict=True) if m
    )
    rendered = render(example.messages, example.tools, add_generation_prompt=False)
    [span] = [s for s in rendered.agent_spans if s.message_index == len(example.messages) - 1]
    assert trained == rendered.text[span.start : span.end]
    assert WRONG not in trained and WRONG in rendered.text


# --------------------------------------------------------------------------- the data


def _digest(data: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()


@pytest.mark.slow  # two rollouts and a resumed one
def test_the_data_is_the_same_after_a_rerun_and_after_a_resumed_rollout(
    runs: Path, tokenizer: Any, tmp_path: Path
) -> None:
    first, summary = onpolicy_records(CONFIG, runs, tokenizer)
    again, _ = onpolicy_records(CONFIG, runs, tokenizer)
    assert _digest(first) == _digest(again)
    assert summary["onpolicy_records"] == len(first) == summary["states"]
    assert summary["off_path"] == summary["unlabelled"] == 0
    assert summary["repeat_states"] == 18 and summary["labels"]["call"] >= 18
    # a rollout cut after 5 episodes, then resumed (the rest run, in another order)
    cut = tmp_path / "cut"
    run_file = next(runs.glob("*.jsonl"))
    lines = run_file.read_text().splitlines(keepends=True)
    (cut / ROLLOUTS / RUNS_DIR).mkdir(parents=True)
    (cut / ROLLOUTS / RUNS_DIR / run_file.name).write_text("".join(lines[:5]))
    resumed = _rollouts(cut)
    assert len(list(read_episodes(next(resumed.glob("*.jsonl"))))) == 9
    data, _ = onpolicy_records(CONFIG, resumed, tokenizer)
    assert _digest(data) == _digest(first)


def test_the_mix_adds_earlier_conversations_to_make_their_share() -> None:
    on = [{"i": i} for i in range(10)]
    earlier = [{"e": i} for i in range(100)]
    half = mix(on, earlier, 0.5, seed=0)
    assert half[:10] == on and len(half) == 20
    assert len(mix(on, earlier, 0.2, seed=0)) == 10 + 2  # 10 × 0.2 / 0.8 = 2.5 → 2
    assert len(mix(on, earlier[:3], 0.5, seed=0)) == 13  # all there are
    assert mix(on, earlier, 0.5, seed=0) == half
    assert mix(on, earlier, 0.5, seed=1) != half
    assert mix(on, earlier, 0.0, seed=0) == on


# --------------------------------------------------------------------------- the recipe


@pytest.mark.parametrize(
    ("recipe", "start"), [("round1", "stage2"), ("round2", "round1"), ("round3", "round2")]
)
def test_each_round_recipe_pins_the_committed_adapter_it_starts_from(
    recipe: str, start: str
) -> None:
    """A round starts from, and rolls out with, the previous stage's committed adapter."""
    from flatscore.models.adapter import adapter_sha256

    here = ROOT / "studies/embedded-train-gemma"
    config = load_recipe(here / f"{recipe}-recipe.json")
    previous = here / start
    assert config.on_policy is not None
    assert config.on_policy.source_adapter_sha256 == adapter_sha256(previous)
    assert config.init_adapter_sha256 == adapter_sha256(previous)
    assert config.on_policy.split == "train"
    assert rollout_source(config, RunOptions(init=previous)) == previous


@pytest.mark.parametrize("name", ["round1", "round2", "round3"])
def test_each_committed_round_was_trained_by_its_recipe(name: str) -> None:
    """A round's committed `config.json` (what training recorded) is its recipe, and its
    `onpolicy.json` holds the states its records came from."""
    here = ROOT / "studies/embedded-train-gemma"
    assert load_recipe(here / name / "config.json") == load_recipe(here / f"{name}-recipe.json")
    summary = json.loads((here / name / "onpolicy.json").read_text())
    labelled = summary["states"] - summary["unlabelled"]
    assert summary["onpolicy_records"] == labelled - summary["cut_at_max_tokens"]
    assert sum(summary["labels"].values()) == labelled


def test_an_on_policy_recipe_needs_its_pinned_source(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--source"):
        rollout_source(CONFIG, RunOptions())
    stage2 = ROOT / "studies/embedded-train-gemma/stage2"
    with pytest.raises(InputError, match="recipe pins 0000"):
        rollout_source(CONFIG, RunOptions(source=stage2))
    recipe = tmp_path / "r.json"
    recipe.write_text(json.dumps({"on_policy": {"source_adapter_sha256": "a", "split": "test"}}))
    with pytest.raises(InputError, match="split"):
        load_recipe(recipe)


@pytest.mark.slow
@pytest.mark.parametrize("domain", ["retail", "telecom"])
def test_the_oracle_from_every_state_of_every_train_task(domain: str) -> None:
    """The known-answer test above on every train task (retail 52, telecom 50)."""
    tasks = get_domain(domain).tasks("train")
    for episode in run_jobs([example_job(t, 5, with_mistake=False) for t in tasks]):
        task = get_domain(domain).task(episode.task_id)
        for i, m in enumerate(episode.messages[1:], 1):
            if m.role == "assistant":
                prefix = episode.messages[:i]
                label = oracle_next_turn(task, prefix)
                assert label is not None and _turn(label) == _turn(m), (episode.task_id, i)


@pytest.mark.parametrize("name", ["round1", "round2", "round3"])
def test_the_round_evaluation_is_stage2s_with_the_rounds_adapter(name: str) -> None:
    """Each round and stage 2 are paired: the same tasks, seeds, sampling and budget."""
    from flatscore.run.study import load_study

    here = ROOT / "studies/embedded-train-gemma"
    stage2 = load_study(ROOT / "examples/embedded-gemma.yaml")
    evaluation = load_study(here / f"{name}-eval.yaml")
    keep = {"name", "title", "output", "models", "base_dir"}
    assert evaluation.model_dump(exclude=keep) == stage2.model_dump(exclude=keep)
    [model], [base] = evaluation.models, stage2.models
    assert model.adapter == str((here / name).resolve())
    assert list(model.arms) == ["ref"]
    assert model.model_dump(exclude={"adapter", "arms"}) == base.model_dump(
        exclude={"adapter", "arms"}
    )


def test_an_on_policy_stage_trains_from_its_rollouts(tmp_path: Path, tokenizer: Any) -> None:
    """`train` with an on-policy recipe: the rollouts (here already played, by the failing
    oracle under the plan the stage makes, so the source's weights are only hashed) become
    `dataset.json` and `onpolicy.json`, and the stage trains on them."""
    from flatscore.models.adapter import ADAPTER_FILE
    from flatscore.models.embedded import LoadedModel
    from flatscore.train.train import train
    from tiny_llama_model import tiny_llama

    source = tmp_path / "source"
    source.mkdir()
    (source / ADAPTER_FILE).write_bytes(b"weights")
    sha = hashlib.sha256(b"weights").hexdigest()
    policy = OnPolicy(source_adapter_sha256=sha, trials=1, tasks_per_domain=2, earlier_share=0)
    config = TrainConfig(
        domains=("telecom",), steps=2, warmup=1, first_layer=1, rank=4, alpha=8, on_policy=policy
    )
    out = tmp_path / "stage"
    run_rollouts(rollout_study(config, source, out, model=AGENT), progress=False)
    model = tiny_llama(vocab=len(tokenizer), hidden=32, heads=2, positions=4096)
    loaded = LoadedModel(model=model, tokenizer=tokenizer, name="tiny", description="tiny")
    options = RunOptions(progress=False, source=source)
    assert train(config, out, options=options, loaded=loaded) == out / "adapter"
    summary = json.loads((out / "onpolicy.json").read_text())
    data = json.loads((out / "dataset.json").read_text())
    assert summary["episodes"] == 2 and summary["onpolicy_records"] == len(data) >= 6
    assert all(sum(r["mask"]) > 0 and r["onpolicy"]["label"] for r in data)
    assert len((out / "loss.jsonl").read_text().splitlines()) == 2


def test_planted_conversations_join_the_states_at_their_share(runs: Path, tokenizer: Any) -> None:
    from flatscore.train.data import make_example

    tasks = get_domain("retail").tasks("train")[:2]
    planted = [make_example(example_job(t, 3, with_mistake=True)) for t in tasks]
    assert all(p is not None for p in planted)
    policy = CONFIG.on_policy.model_copy(update={"earlier_share": 0.5})  # type: ignore[union-attr]
    config = CONFIG.model_copy(update={"on_policy": policy})
    data, summary = onpolicy_records(config, runs, tokenizer, earlier=planted)  # type: ignore[arg-type]
    assert (summary["earlier_available"], summary["earlier_records"]) == (2, 2)
    assert len(data) == summary["onpolicy_records"] + 2
    assert [r["mistake"] is not None for r in data[-2:]] == [True, True]
    assert all("onpolicy" in r for r in data[:-2]) and not any("onpolicy" in r for r in data[-2:])


def test_planted_rollouts_label_the_planted_call_and_what_the_agent_did_next(
    tmp_path: Path,
) -> None:
    """`inject`: the rollouts add the arm `ref-planted` (the same agent, a required argument
    dropped from every call here). Known answer with the plain oracle playing: `ref`'s
    episodes fail nowhere; every failed turn of `ref-planted` is one the arm's metadata
    says it damaged and is flagged planted; the first one's label is the call as the agent
    made it (the dropped argument back), and no state is labelled past a call that never
    succeeded (the gold action the oracle goes on with is still the first one)."""
    from flatscore.study import InjectRates

    policy = OnPolicy(
        source_adapter_sha256=SOURCE_SHA,
        trials=1,
        earlier_share=0.0,
        inject=InjectRates(drop_argument=1.0),
    )
    config = CONFIG.model_copy(update={"on_policy": policy})
    study = rollout_study(config, tmp_path, tmp_path, model={"kind": "agent", "agent": "oracle"})
    [model] = study.models
    assert list(model.arms) == ["ref", "ref-planted"]
    inject = model.arms["ref-planted"].inject
    assert inject is not None and (inject.base, inject.drop_argument) == ("ref", 1.0)
    task_ids = sorted(TEMPLATES.values())[:4]
    runs = run_rollouts(study.model_copy(update={"task_ids": task_ids}), progress=False)
    episodes = rollout_episodes(runs)
    pairs = [(e.task_id, e.arm) for e in episodes]
    assert sorted(pairs) == sorted((t, a) for t in task_ids for a in ("ref", "ref-planted"))
    assert [a for _, a in pairs] == ["ref", "ref-planted"] * len(task_ids)  # arm last
    tally = Tally()
    for episode in episodes:
        items = episode_examples(episode, tally)
        if episode.arm == "ref":
            assert items == []
            continue
        changes = {c["call_id"]: c for c in episode.metadata["injected"]["changes"]}
        labels = []
        for item in items:
            [failed] = episode.messages[item.state.end - 2].tool_calls
            assert item.state.planted and failed.id in changes
            [label] = item.example.messages[-1].tool_calls
            labels.append(label)
        first = changes[episode.messages[items[0].state.end - 2].tool_calls[0].id]
        assert labels[0].name == first["name"] and first["argument"] in labels[0].arguments
        assert all(label == labels[0] for label in labels)
    assert tally.planted == tally.states >= len(task_ids)
    assert tally.as_dict()["planted_states"] == tally.planted
    assert "planted_states" not in Tally().as_dict()  # the summaries of earlier rounds


def test_an_inject_arms_states_start_at_its_first_planted_call(runs: Path) -> None:
    """Known answer: a failing-oracle episode (three wrong calls, then a write re-issued)
    read as an inject arm's, with the re-issue as its planted call, keeps the re-issue's
    state only; the loop states before it are the reference's own, counted as left out."""
    [episode] = [
        e
        for e in rollout_episodes(runs)
        if any(c.id == "call_again_bad" for m in e.messages for c in m.tool_calls)
    ][:1]
    own = episode_examples(episode)
    assert [s.state.repeat for s in own][:3] == [False, True, True]
    injected = {"changes": [{"call_id": "call_again_bad", "kind": "drop_argument"}]}
    planted = episode.model_copy(update={"metadata": {**episode.metadata, "injected": injected}})
    tally = Tally()
    kept = episode_examples(planted, tally)
    assert [(s.state.end, s.state.planted) for s in kept] == [(own[-1].state.end, True)]
    assert tally.before_plant == len(own) - 1 and tally.planted == 1
    assert tally.as_dict()["before_plant_left_out"] == len(own) - 1
