"""Training data: masks cover exactly the trained agent spans; recovery examples hold one
failed call of a named channel followed by a corrected call or a clarifying question; every
example is a successful episode."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from flatscore.agents.mistakes import MISTAKE_CHANNELS
from flatscore.agents.oracle import NOT_FOUND
from flatscore.analysis.channels import LEAF_CHANNELS, load_rules
from flatscore.analysis.facts import episode_facts
from flatscore.domains import get_domain
from flatscore.models.chat_format import render
from flatscore.run.episode_loop import GREETING, EpisodeSpec, run_episode
from flatscore.train.data import (
    DOMAINS,
    Example,
    SlipOracle,
    example_job,
    make_example,
    tokenize,
)
from flatscore.users import ScriptedUser


def _example(domain: str, index: int, seed: int, mistake: bool) -> Example:
    task = get_domain(domain).tasks("train")[index]
    example = make_example(example_job(task, seed, with_mistake=mistake))
    assert example is not None
    return example


def _masked_text(example: Example, tokenizer: Any) -> str:
    tok = tokenize(example, tokenizer)
    return "".join(
        tokenizer.decode([i]) for i, m in zip(tok.ids, tok.labels_mask, strict=True) if m
    )


@pytest.mark.parametrize("domain", ["retail", "telecom"])
def test_mask_covers_exactly_the_trained_agent_spans(domain: str, tokenizer: Any) -> None:
    example = _example(domain, 0, seed=1, mistake=False)
    rendered = render(example.messages, example.tools, add_generation_prompt=False)
    expected = "".join(
        rendered.text[s.start : s.end]
        for s in rendered.agent_spans
        if s.message_index in example.trained
    )
    assert _masked_text(example, tokenizer) == expected
    # Every trained span ends its turn with <|im_end|>; the system prompt, user turns and
    # tool results carry no loss.
    assert expected.count("<|im_end|>") == len(example.trained)
    assert "Tools:" not in expected and "<|im_start|>" not in expected


def test_tokens_and_mask_reproduce_the_rendered_text(tokenizer: Any) -> None:
    example = _example("retail", 1, seed=2, mistake=False)
    tok = tokenize(example, tokenizer)
    rendered = render(example.messages, example.tools, add_generation_prompt=False)
    assert len(tok.ids) == len(tok.labels_mask)
    assert tokenizer.decode(tok.ids) == rendered.text


def test_greeting_is_not_trained() -> None:
    example = _example("retail", 0, seed=1, mistake=False)
    assert example.messages[1].content == GREETING
    assert 1 not in example.trained
    assert example.trained, "the agent's own turns are trained"
    assert example.messages[example.trained[-1]] is example.messages[-1]


def _recovery(example: Example) -> tuple[int, int]:
    """(index of the failed call's message, index of the next agent message)."""
    msgs = example.messages
    failed = [
        i
        for i, m in enumerate(msgs)
        if m.role == "tool" and m.tool_result is not None and m.tool_result.error
    ]
    assert len(failed) == 1
    bad = failed[0] - 1
    assert msgs[bad].role == "assistant" and msgs[bad].tool_calls
    nxt = next(i for i in range(failed[0] + 1, len(msgs)) if msgs[i].role == "assistant")
    return bad, nxt


@pytest.mark.parametrize("domain", ["retail", "telecom"])
def test_recovery_examples_fail_once_then_correct(domain: str, tokenizer: Any) -> None:
    kinds = set()
    for task in get_domain(domain).tasks("train")[::4]:
        example = make_example(example_job(task, 7, with_mistake=True))
        if example is None:
            continue
        kinds.add(example.mistake)
        bad, nxt = _recovery(example)
        assert bad not in example.trained and nxt in example.trained
        wrong = example.messages[bad].tool_calls[0]
        fixed = example.messages[nxt]
        if fixed.content and fixed.content.startswith(NOT_FOUND):
            # A value the user gave named no record: the agent asks for it again, then
            # makes the corrected call.
            assert example.mistake == "entity_not_found"
            assert not fixed.tool_calls
            after = next(
                i
                for i in range(nxt + 1, len(example.messages))
                if example.messages[i].role == "assistant"
            )
            assert after in example.trained and example.messages[after].tool_calls
        elif example.mistake == "role_confusion":
            # The agent called a phone tool itself; the correction asks the user to do it.
            assert wrong.name in get_domain(domain).tool_lists().user
            assert fixed.content and not fixed.tool_calls
        else:
            # The corrected call: a real tool, answered without an error.
            call = fixed.tool_calls[0]
            assert call.name in get_domain(domain).tool_lists().agent
            assert (call.name, call.arguments) != (wrong.name, wrong.arguments)
        # The mistake itself carries no loss.
        assert '"name": "' + wrong.name + '"' not in _masked_text(example, tokenizer) or (
            wrong.name in get_domain(domain).tool_lists().agent
        )
    assert len(kinds) >= 2


@pytest.mark.slow  # every recovery kind built (7 s); one per channel below is fast
def test_recovery_kinds_cover_the_channels() -> None:
    """One planted mistake per train task: every channel occurs, each in both domains
    where the domain allows it (role confusion needs the user's tools), and every task
    gives an example (a planted mistake never spoils the episode)."""
    from flatscore.train.data import build_examples
    from flatscore.train.recipe import TrainConfig

    examples = build_examples(TrainConfig(variants=1, mistake_share=1.0, data_seed=3))
    kinds = {(e.domain, e.mistake) for e in examples}
    assert {k for _, k in kinds} == set(MISTAKE_CHANNELS)
    assert {k for d, k in kinds if d == "retail"} == set(MISTAKE_CHANNELS) - {"role_confusion"}
    assert len(examples) == sum(len(get_domain(d).tasks("train")) for d in DOMAINS)
    assert all(e.task_id in {t.id for t in get_domain(e.domain).tasks("train")} for e in examples)


@pytest.mark.parametrize("domain", ["retail", "telecom"])
def test_planted_mistakes_land_in_their_channel(domain: str) -> None:
    """The analysis classifies a planted failure as the channel it was planted as (the
    name channels it does not split yet count as `invented`), twice per channel."""
    d = get_domain(domain)
    rules = load_rules()
    tasks = d.tasks("train")
    allowed = set(MISTAKE_CHANNELS) - ({"role_confusion"} if d.user_toolkit is None else set())
    for channel in sorted(allowed):
        landed = 0
        for n, task in enumerate(tasks):
            agent = SlipOracle(mistake_seed=n, channels=(channel,))
            spec = EpisodeSpec(domain=d, task=task, trial=0, seed=n)
            episode = asyncio.run(run_episode(spec, agent, ScriptedUser()))
            if agent.mistake is None:
                continue
            facts = episode_facts(episode, rules)
            expected = channel if channel in LEAF_CHANNELS else "invented"
            assert episode.succeeded, (task.id, channel)
            assert facts.agent_failed == 1 and facts.channels[expected] == 1, (task.id, channel)
            landed += 1
            if landed == 2:
                break
        assert landed == 2, channel


@pytest.mark.parametrize("index", [0, 1, 2, 3])
def test_identification_detour_asks_the_other_way_first(index: int) -> None:
    from flatscore.agents.oracle import ask_text
    from flatscore.train.data import EMAIL, NAME_ZIP

    task = get_domain("retail").tasks("train")[index]
    example = make_example(example_job(task, 5, with_mistake=False, detour=True))
    assert example is not None and example.detour
    asks = [m.content for m in example.messages if m.role == "assistant" and not m.tool_calls]
    if "email" in task.scenario.known_info:
        # Asked for name + zip, the user offers the email; no second ask.
        assert ask_text(NAME_ZIP) in asks and ask_text(EMAIL) not in asks
    else:
        assert asks.index(ask_text(EMAIL)) < asks.index(ask_text(NAME_ZIP))
    assert not any(m.role == "tool" and m.tool_result.error for m in example.messages)  # type: ignore[union-attr]


def test_detour_is_a_no_op_without_identification() -> None:
    task = get_domain("telecom").tasks("train")[0]
    example = make_example(example_job(task, 5, with_mistake=False, detour=True))
    assert example is not None and not example.detour


@pytest.mark.parametrize("domain", ["retail", "telecom"])
def test_several_repeated_mistakes_each_fail_then_are_corrected(domain: str) -> None:
    """The recovery stage's mix: up to three mistakes, some made twice. Every failing call
    is a planted one and carries no loss; after the last failing call of each mistake the
    agent does something else (the correction or a question), which is trained."""
    from flatscore.train.data import MistakeMix

    mix = MistakeMix(most=3, repeat_share=1.0, natural=True)
    seen_many = seen_repeat = 0
    for n, task in enumerate(get_domain(domain).tasks("train")[::3]):
        example = make_example(example_job(task, n, with_mistake=True, mix=mix))
        if example is None:
            continue
        msgs = example.messages
        failed = [
            i - 1
            for i, m in enumerate(msgs)
            if m.role == "tool" and m.tool_result is not None and m.tool_result.error
        ]
        channels = (example.mistake or "").split("+")
        assert len(failed) == 2 * len(channels)  # every mistake made twice
        seen_many += len(channels) > 1
        for a, b in zip(failed[::2], failed[1::2], strict=True):
            assert msgs[a].tool_calls[0].model_dump(exclude={"id"}) == msgs[b].tool_calls[
                0
            ].model_dump(exclude={"id"})
            seen_repeat += 1
        for bad in failed:
            assert bad not in example.trained
        for bad in failed[1::2]:
            nxt = next(i for i in range(bad + 2, len(msgs)) if msgs[i].role == "assistant")
            assert nxt in example.trained
            assert msgs[nxt].tool_calls[:1] != msgs[bad].tool_calls[:1]
    assert seen_many > 0 and seen_repeat > 0


def test_the_default_mix_plants_what_plant_one_plants() -> None:
    """The first recovery data's draws are unchanged (its sha256 is pinned in the docs)."""
    import random

    from flatscore.agents.mistakes import plant, plant_one

    for domain in DOMAINS:
        d = get_domain(domain)
        for n, task in enumerate(d.tasks("train")[:12]):
            one = plant_one(d, task, random.Random(n), MISTAKE_CHANNELS)
            many = plant(d, task, random.Random(n), MISTAKE_CHANNELS, count=1)
            assert many == ([one] if one else [])
            three = plant(d, task, random.Random(n), MISTAKE_CHANNELS, count=3)
            assert len({m.before for m in three}) == len(three) <= 3
            assert [m.before for m in three] == sorted(m.before for m in three)


def test_the_plan_takes_every_data_setting_from_the_recipe() -> None:
    """`plan_examples(config)`: variants, seeds, shares, domains and the mistake mix all
    come from the recipe (the one place they are written)."""
    from flatscore.train.data import MistakeMix, plan_examples
    from flatscore.train.recipe import TrainConfig

    config = TrainConfig(
        variants=3,
        mistake_share=1.0,
        detour_share=0.0,
        data_seed=2,
        domains=("telecom",),
        mistakes_most=3,
        repeat_share=0.35,
        natural_mistakes=True,
    )
    jobs = plan_examples(config)
    assert len(jobs) == 3 * len(get_domain("telecom").tasks("train"))
    assert {j.domain for j in jobs} == {"telecom"}
    assert [j.seed for j in jobs[:4]] == [2000, 2001, 2002, 2000]
    assert all(j.agent.options["mistake_seed"] == j.seed for j in jobs)
    assert not any(j.agent.options["detour"] for j in jobs)
    assert {j.agent.options["mix"] for j in jobs} == {MistakeMix(3, 0.35, True)}
    none = plan_examples(config.model_copy(update={"mistake_share": 0.0, "detour_share": 1.0}))
    assert all(j.agent.options["mistake_seed"] is None and j.agent.options["detour"] for j in none)


def test_training_episodes_run_through_the_executor_in_plan_order() -> None:
    """The plan's jobs run on the local executor; the episodes come back in plan order and
    do not depend on how many are in flight (each has its own agent, user and draws)."""
    from flatscore.train.data import TRAIN_AGENT, example_from, plan_examples, run_jobs
    from flatscore.train.recipe import TrainConfig

    jobs = plan_examples(TrainConfig(variants=2, mistake_share=0.5, domains=("telecom",)))[:8]
    assert {j.agent.agent for j in jobs} == {TRAIN_AGENT}
    assert [(j.task_id, j.trial) for j in jobs[:2]] == [(jobs[0].task_id, 0), (jobs[0].task_id, 1)]
    one, many = run_jobs(jobs, concurrency=1), run_jobs(jobs, concurrency=4)
    assert [e.episode_id for e in many] == [j.episode_id for j in jobs]
    timeless = [[m.model_dump(exclude={"latency_s", "timing"}) for m in e.messages] for e in one]
    assert timeless == [
        [m.model_dump(exclude={"latency_s", "timing"}) for m in e.messages] for e in many
    ]
    planted = [j for j, e in zip(jobs, one, strict=True) if e.metadata["planted"]]
    assert planted and all(j.agent.options["mistake_seed"] == j.seed for j in planted)
    examples = [example_from(j, e) for j, e in zip(jobs, one, strict=True)]
    assert all(x is None or x.seed == j.seed for x, j in zip(examples, jobs, strict=True))


def test_a_tokenizer_that_adds_bos_starts_every_example_with_it(tokenizer: Any) -> None:
    """Gemma's tokenizer starts a sequence with `<bos>`, and Gemma is far off its training
    without it: examples are tokenized with it, untrained; SmolLM2's tokenizer adds none."""
    from tokenizers.processors import TemplateProcessing

    bos_id = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    with_bos = copy.deepcopy(tokenizer)
    with_bos.backend_tokenizer.post_processor = TemplateProcessing(
        single="<|endoftext|> $A", special_tokens=[("<|endoftext|>", bos_id)]
    )
    example = _example("retail", 0, seed=1, mistake=False)
    plain, bos = tokenize(example, tokenizer), tokenize(example, with_bos)
    assert plain.ids[0] != bos_id
    assert bos.ids == [bos_id, *plain.ids]
    assert bos.labels_mask == [False, *plain.labels_mask]
