"""The planted-damage (`inject`) arm: its rules on known names, its seeding, the study file's
checks, and a study whose analysis gets the planted rates back."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from flatscore.agents.inject import same_purpose_user_tool
from flatscore.analysis.analyze import analyze
from flatscore.domains import get_domain
from flatscore.errors import InputError
from flatscore.run.driver import run_study
from flatscore.run.study import load_study
from flatscore.store.jsonl import read_episodes
from flatscore.study import InjectSpec

PHONE = get_domain("telecom").user_toolkit.tool_names()  # type: ignore[union-attr]


def test_same_purpose_user_tool_known_answers() -> None:
    assert same_purpose_user_tool("enable_roaming", PHONE) == "set_data_roaming"
    assert same_purpose_user_tool("add_data", PHONE) == "set_mobile_data"
    assert same_purpose_user_tool("get_bills", PHONE) == PHONE[0]  # nothing shared: the first
    assert same_purpose_user_tool("get_bills", []) is None  # retail: no user tools


def study_file(
    tmp_path: Path, arms: dict[str, object], domains: list[str], tasks: int = 50
) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    data = {
        "name": "planted",
        "output": "out",
        "models": [{"name": "oracle", "kind": "agent", "agent": "oracle", "arms": arms}],
        "domains": domains,
        "split": "test",
        "tasks_per_domain": tasks,
        "trials": 1,
        "user": {"kind": "scripted"},
        "concurrency": 8,
        "analysis": {"bootstrap": 200},
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data), "utf-8")
    return path


def test_an_inject_arm_needs_an_uninjected_base_and_nothing_else(tmp_path: Path) -> None:
    bad = {"ref": {}, "x": {"inject": {"base": "nope", "role_confusion": 0.1}}}
    with pytest.raises(InputError, match=r"inject\.base"):
        load_study(study_file(tmp_path, bad, ["telecom"]))
    extra = {"ref": {}, "x": {"inject": {"base": "ref"}, "options": {"slip_rate": 0.1}}}
    with pytest.raises(InputError, match="takes everything from its base"):
        load_study(study_file(tmp_path, extra, ["telecom"]))
    rate = {"ref": {}, "x": {"inject": {"base": "ref", "drop_argument": 1.5}}}
    with pytest.raises(InputError, match="drop_argument"):
        load_study(study_file(tmp_path, rate, ["telecom"]))


def within(count: int, n: int, p: float) -> bool:
    """count/n within 3.3 binomial standard errors of p (two-sided ~0.001)."""
    return abs(count / n - p) <= 3.3 * math.sqrt(p * (1 - p) / n)


def test_the_analysis_gets_the_planted_rates_back(tmp_path: Path) -> None:
    p, q = 0.25, 0.2
    arms = {
        "ref": {},
        "planted": {"inject": {"base": "ref", "role_confusion": p, "drop_argument": q}},
    }
    study = load_study(study_file(tmp_path, arms, ["telecom", "retail"]))
    run_study(study, progress=False, report=False)
    runs = study.output_dir / "runs"
    planted = list(read_episodes(runs / "oracle__planted.jsonl"))
    ref = list(read_episodes(runs / "oracle__ref.jsonl"))
    result = analyze(planted + ref)
    # every episode records what was planted, and a rerun plants the same (seeded per episode)
    records = {e.task_id: e.metadata["injected"] for e in planted}
    assert all(r["base"] == "ref" and r["role_confusion"] == p for r in records.values())
    for domain in ("telecom", "retail"):
        (cell,) = [c for c in result.cells if c.domain == domain]
        arm = next(a for a in cell.arms if a.arm == "planted")
        base = next(a for a in cell.arms if a.arm == "ref")
        changes = [
            c for e in planted if e.domain == domain for c in e.metadata["injected"]["changes"]
        ]
        confused = sum(c["kind"] == "role_confusion" for c in changes)
        dropped = sum(c["kind"] == "drop_argument" for c in changes)
        # the analysis finds every planted failure, in its channel, and nothing else new
        assert arm.channels["role_confusion"].count == confused
        assert arm.channels["bad_arguments"].count == dropped + base.channels["bad_arguments"].count
        calls = arm.agent_tool_calls
        assert calls == sum(
            e.metadata["injected"]["agent_calls"] for e in planted if e.domain == domain
        )
        if domain == "telecom":  # every call has a user tool to be confused with
            assert calls > 50 and within(confused, calls, p)
        else:  # retail has no user tools: nothing to confuse
            assert confused == 0
        # a dropped argument needs a call that was not confused and passed a required one
        tools = {t["function"]["name"]: t for t in get_domain(domain).agent_tool_schemas()}
        eligible = sum(
            1
            for e in planted
            if e.domain == domain
            for m in e.messages
            if m.role == "assistant"
            for call in m.tool_calls
            if call.name in tools and tools[call.name]["function"]["parameters"].get("required")
        )
        assert eligible > 40 and within(dropped, eligible, q)
    # the same episodes again plant exactly the same (seeded per episode, not per run)
    again = load_study(study_file(tmp_path / "again", arms, ["telecom"], tasks=8))
    run_study(again, progress=False, report=False)
    rerun = read_episodes(again.output_dir / "runs" / "oracle__planted.jsonl")
    assert all(e.metadata["injected"] == records[e.task_id] for e in rerun)


def test_inject_spec_rates_are_probabilities() -> None:
    with pytest.raises(ValueError):
        InjectSpec(base="ref", role_confusion=-0.1)


def test_same_kind_ids_known_answers() -> None:
    from flatscore.agents.inject import same_kind_ids
    from flatscore.episode import Message, ToolResult

    conversation = [
        Message(role="user", content="My orders are W1002 and W1001; item I0007."),
        Message(
            role="tool", tool_result=ToolResult(call_id="c", text='{"orders": ["W1003", "W1001"]}')
        ),
    ]
    assert same_kind_ids("W1001", conversation) == ["W1002", "W1003"]  # first seen first
    assert same_kind_ids("I0007", conversation) == []  # no other item in view
    assert same_kind_ids("jo@example.com", conversation) == []  # not an id
    assert same_kind_ids("L1001", conversation) == []  # no line in view


def test_a_wrong_value_arm_swaps_an_id_for_another_in_view(tmp_path: Path) -> None:
    """`wrong_value` = 1: every agent call with an id argument that has another id of its
    kind in view gets it, recorded; the other calls are left alone; the failures land in the
    channels a wrong entity fails in; and the other kinds' draws are those of an arm without
    it (their stream is unchanged)."""
    from flatscore.agents.inject import ID

    arms = {
        "ref": {},
        "wrong": {"inject": {"base": "ref", "wrong_value": 1.0}},
        "drop": {"inject": {"base": "ref", "drop_argument": 0.3}},
        "drop+wrong": {"inject": {"base": "ref", "drop_argument": 0.3, "wrong_value": 0.5}},
    }
    study = load_study(study_file(tmp_path, arms, ["retail"], tasks=12))
    run_study(study, progress=False, report=False)
    runs = study.output_dir / "runs"
    wrong = list(read_episodes(runs / "oracle__wrong.jsonl"))
    swapped = 0
    for episode in wrong:
        record = episode.metadata["injected"]
        assert record["wrong_value"] == 1.0
        changes = {c["call_id"]: c for c in record["changes"]}
        for i, m in enumerate(episode.messages):
            for call in m.tool_calls:
                change = changes.get(call.id)
                if change is None:
                    continue
                swapped += 1
                assert change["kind"] == "wrong_value" and change["from"] != change["to"]
                value = call.arguments[change["argument"]]
                assert change["to"] in (value if isinstance(value, list) else [value])
                kind = ID.fullmatch(change["from"])
                assert kind is not None and change["to"].startswith(kind.group(1))
                shown = " ".join(
                    (x.tool_result.text if x.tool_result else x.content or "")
                    for x in episode.messages[:i]
                )
                assert change["to"] in shown
    assert swapped >= 12
    result = analyze(wrong + list(read_episodes(runs / "oracle__ref.jsonl")))
    arm = next(a for a in result.cells[0].arms if a.arm == "wrong")
    failed = arm.channels["precondition"].count + arm.channels["entity_not_found"].count
    assert 0 < failed <= swapped
    # drop_argument's draws do not see wrong_value's: the same calls lose an argument
    drops = {
        e.task_id: [c for c in e.metadata["injected"]["changes"] if c["kind"] == "drop_argument"]
        for e in read_episodes(runs / "oracle__drop.jsonl")
    }
    both = list(read_episodes(runs / "oracle__drop+wrong.jsonl"))
    assert any(c["kind"] == "wrong_value" for e in both for c in e.metadata["injected"]["changes"])
    for e in both:
        assert [
            c for c in e.metadata["injected"]["changes"] if c["kind"] == "drop_argument"
        ] == drops[e.task_id]
    # an arm without it records what it recorded before the kind existed
    drop_arm = next(iter(read_episodes(runs / "oracle__drop.jsonl")))
    assert "wrong_value" not in drop_arm.metadata["injected"]
