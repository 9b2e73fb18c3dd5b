"""The mistake planter: every planted call fails in its channel without touching the world,
known cases are found, and the recovery follows the mistake."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from flatscore.agents.mistakes import ENV_KIND, MISTAKE_CHANNELS, mistake_options, plant_one
from flatscore.agents.oracle import NOT_FOUND, oracle_plan
from flatscore.domains import get_domain

RETAIL, TELECOM = get_domain("retail"), get_domain("telecom")


@settings(max_examples=25, deadline=None)
@given(
    domain=st.sampled_from(["retail", "telecom"]),
    pick=st.integers(0, 10_000),
    seed=st.integers(0, 10_000),
    natural=st.booleans(),
)
def test_every_option_fails_in_its_channel_and_changes_nothing(
    domain: str, pick: int, seed: int, natural: bool
) -> None:
    d = get_domain(domain)
    task = d.tasks()[pick % len(d.tasks())]
    index = seed % len(task.actions)
    options = mistake_options(
        d, task, index, random.Random(seed), MISTAKE_CHANNELS, natural=natural
    )
    env = d.new_environment(task)
    for action in task.actions[:index]:
        env.apply(action)
    before = (env.db_hash(), env.device_state())
    for channel, mistakes in options.items():
        for m in mistakes:
            result = env.execute(m.call)
            assert result.error and result.error_kind == ENV_KIND[channel], (channel, m.call)
            assert (env.db_hash(), env.device_state()) == before
            assert m.call.name not in d.tool_lists().agent or channel not in (
                "near_miss",
                "invented",
                "not_a_name",
                "role_confusion",
            )
    # a phone step offers only role confusion; an agent step never does
    is_user = task.actions[index].requestor == "user"
    assert set(options) <= {"role_confusion"} if is_user else "role_confusion" not in options


def test_known_mistakes_are_found() -> None:
    suspended = next(t for t in TELECOM.tasks("train") if t.template == "suspended")
    pay = next(i for i, a in enumerate(suspended.actions) if a.name == "pay_bill")
    options = mistake_options(TELECOM, suspended, pay, random.Random(0), MISTAKE_CHANNELS)
    # resuming before paying is refused by the rule: a precondition, then pay, then resume
    assert any(m.call.name == "resume_line" for m in options["precondition"])
    cancel = next(t for t in RETAIL.tasks("train") if t.template == "cancel")
    options = mistake_options(RETAIL, cancel, 0, random.Random(0), MISTAKE_CHANNELS)
    assert set(options) == set(MISTAKE_CHANNELS) - {"role_confusion", "precondition"}
    # the user's own identification named no record: ask for it again
    assert all(m.ask for m in options["entity_not_found"])


def test_a_clarifying_question_follows_a_wrong_value_the_user_gave() -> None:
    task = next(t for t in TELECOM.tasks("train") if t.template == "refuel")
    rng = random.Random(1)
    mistake = plant_one(TELECOM, task, rng, ("entity_not_found",))
    assert mistake is not None
    plan = oracle_plan(task, mistakes=(mistake,))
    slip = next(
        i for i, m in enumerate(plan) if m.tool_calls and m.tool_calls[0].id.endswith("_slip")
    )
    gold = task.actions[mistake.before]
    following = plan[slip + 1 : slip + 3]
    if mistake.ask:
        assert following[0].content and following[0].content.startswith(NOT_FOUND)
        assert following[1].tool_calls[0].name == gold.name
    else:
        assert following[0].tool_calls[0].arguments == gold.arguments


def test_natural_mistakes_are_the_kinds_the_reference_made() -> None:
    """An argument no tool takes (`return_items(..., refund=...)`) and a value typed as the
    name are offered with `natural`, never without."""
    task = next(t for t in RETAIL.tasks("train") if t.template == "return")
    index = next(i for i, a in enumerate(task.actions) if a.name == "return_items")
    plain = mistake_options(RETAIL, task, index, random.Random(0), MISTAKE_CHANNELS)
    natural = mistake_options(RETAIL, task, index, random.Random(0), MISTAKE_CHANNELS, natural=True)
    extra = [
        m
        for m in natural["bad_arguments"]
        if set(m.call.arguments) - set(task.actions[index].arguments)
    ]
    assert extra and not [
        m
        for m in plain["bad_arguments"]
        if set(m.call.arguments) - set(task.actions[index].arguments) - {"id"}
    ]
    # the user's first name typed as the tool's name (the reference's 'Xavier')
    first = mistake_options(RETAIL, task, 0, random.Random(0), MISTAKE_CHANNELS, natural=True)
    first_name = task.actions[0].arguments["first_name"]
    assert task.actions[0].name == "find_user_by_name_zip"
    assert first_name in {m.call.name for m in first["not_a_name"]}
