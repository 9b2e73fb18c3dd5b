"""Inspect AI logs in and out, on logs written by Inspect itself (tests/fixtures/inspect/,
made by `make_fixtures.py`: an agent task run by `inspect_ai.eval` against `mockllm`).

The import's counts are checked against a count made here straight from the log's raw JSON
(the `.eval` zip's members, the `.json` file), not through Inspect or flatscore; the export
is read back with Inspect's own reader.
"""

from __future__ import annotations

import json
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("inspect_ai", reason="the `inspect` extra is not installed")

from inspect_ai.log import read_eval_log, read_eval_log_samples

from flatscore.analysis.channels import load_rules
from flatscore.analysis.facts import episode_facts
from flatscore.episode import Episode
from flatscore.errors import InputError
from flatscore.formats.inspect_export import export_inspect
from flatscore.formats.inspect_import import import_inspect
from flatscore.formats.inspect_log import load_error_map, read_inspect
from flatscore.store.jsonl import read_episodes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "inspect"
EVAL_LOG = FIXTURES / "orders.eval"
JSON_LOG = FIXTURES / "orders.json"
LOGS = [EVAL_LOG, JSON_LOG]


def raw_samples(path: Path) -> list[dict[str, Any]]:
    """The log's samples as plain JSON, read without Inspect or flatscore."""
    if path.suffix == ".json":
        return json.loads(path.read_text("utf-8"))["samples"]
    with zipfile.ZipFile(path) as zf:
        names = sorted(n for n in zf.namelist() if n.startswith("samples/"))
        return [json.loads(zf.read(n)) for n in names]


def independent_counts(path: Path) -> dict[str, Any]:
    samples = raw_samples(path)
    calls = failed = 0
    by_type: Counter[str] = Counter()
    for s in samples:
        for m in s["messages"]:
            if m["role"] == "assistant":
                calls += len(m.get("tool_calls") or [])
            elif m["role"] == "tool" and m.get("error"):
                failed += 1
                by_type[m["error"]["type"]] += 1
    return {
        "episodes": len(samples),
        "agent_calls": calls,
        "failed": failed,
        "by_type": dict(by_type),
        "successes": sum(s["scores"]["cancelled"]["value"] == "C" for s in samples),
        "trials": sorted({s["epoch"] - 1 for s in samples}),
        "tasks": sorted({s["id"] for s in samples}),
    }


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.suffix)
def test_import_counts_match_the_log(path: Path) -> None:
    expected = independent_counts(path)
    episodes = list(read_inspect(path, arm="bf16"))
    rules = load_rules()
    facts = [episode_facts(ep, rules) for ep in episodes]
    assert len(episodes) == expected["episodes"] == 6
    assert sum(f.agent_calls for f in facts) == expected["agent_calls"] == 22
    assert sum(f.agent_failed for f in facts) == expected["failed"] == 16
    assert sum(f.succeeded for f in facts) == expected["successes"] == 2
    assert sorted({ep.trial for ep in episodes}) == expected["trials"] == [0, 1]
    assert sorted({ep.task_id for ep in episodes}) == expected["tasks"]
    types: Counter[str] = Counter()
    for ep in episodes:
        types.update(ep.metadata.get("inspect_tool_errors", {}))
    assert (
        dict(types)
        == expected["by_type"]
        == {
            "parsing": 8,
            "unknown": 4,
            "timeout": 2,
            "permission": 2,
        }
    )
    # Known answer, per epoch (make_fixtures.py's scripts): 2 calls to names that are not
    # the agent's tools (one is the user's), 2 bad argument lists (a required field missing,
    # JSON cut short), "Order A3 not found", a timeout, a permission refusal and "Cannot
    # cancel ... not pending".
    channels: Counter[str] = Counter()
    for f in facts:
        channels.update({k: v for k, v in f.channels.items() if v})
    base = {"bad_arguments", "entity_not_found", "precondition", "other"}
    assert {k: channels[k] for k in base} == {
        "bad_arguments": 4,
        "entity_not_found": 2,
        "precondition": 4,
        "other": 2,
    }
    assert sum(v for k, v in channels.items() if k not in base) == 4  # unknown_tool level
    assert channels["role_confusion"] == 2  # toggle_airplane_mode: the user's tool


def test_sample_mapping_details() -> None:
    eps = {(e.task_id, e.trial): e for e in read_inspect(EVAL_LOG)}
    ep = eps[("cancel-A3", 1)]
    header = read_eval_log(str(EVAL_LOG), header_only=True)
    assert ep.arm == ep.model == header.eval.model == "mockllm/model"
    assert ep.domain == "orders" and ep.study == "inspect"
    assert ep.tools.agent == ["cancel_order", "check_stock", "lookup_order"]
    assert ep.tools.user == ["toggle_airplane_mode"] and ep.tools.source == "tool_defs"
    assert ep.reward == 0.0 and ep.termination_reason.value == "agent_stop"
    assert ep.source is not None and ep.source.format == "inspect-eval"
    unparseable = [c for m in ep.messages for c in m.tool_calls if not c.arguments_parsed]
    assert len(unparseable) == 1 and '{"order_id": "A3"' in str(unparseable[0].arguments)
    texts = [m.tool_result.text for m in ep.messages if m.tool_result and m.tool_result.error]
    assert "Tool refund_everything not found" in texts
    assert ep.usage.prompt_tokens > 0  # the agent's calls only: the user role's are left out
    assert eps[("cancel-A1", 0)].succeeded


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.suffix)
def test_usage_is_the_agents_own_not_the_simulated_users(path: Path) -> None:
    """Each episode's tokens are the sum over the log's model events of every role but the
    simulated user's (counted here from the raw JSON); the user's own calls used tokens too,
    so counting them would show."""
    eps = {(e.task_id, e.trial): e for e in read_inspect(path)}
    user_tokens = 0
    for raw in raw_samples(path):
        events = [e for e in raw["events"] if e.get("event") == "model"]
        usage = [(e.get("role"), e["output"].get("usage") or {}) for e in events]
        agent = [u for role, u in usage if role != "user"]
        user_tokens += sum(u.get("input_tokens", 0) for role, u in usage if role == "user")
        ep = eps[(str(raw["id"]), raw["epoch"] - 1)]
        assert ep.usage.prompt_tokens == sum(u.get("input_tokens", 0) for u in agent)
        assert ep.usage.completion_tokens == sum(u.get("output_tokens", 0) for u in agent)
    assert user_tokens > 0


def test_eval_and_json_give_the_same_episodes() -> None:
    def key(e: Episode) -> tuple[str, int]:
        return (e.task_id, e.trial)

    a = sorted(read_inspect(EVAL_LOG), key=key)
    b = sorted(read_inspect(JSON_LOG), key=key)
    drop = {"source": True}
    assert [e.model_dump(exclude=drop) for e in a] == [e.model_dump(exclude=drop) for e in b]


def test_import_is_idempotent_and_atomic(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    first = import_inspect([EVAL_LOG], out, arm="bf16")
    assert (first.written, first.already_present) == (6, 0)
    assert first.files[0].tool_source == "tool_defs"
    again = import_inspect([EVAL_LOG, JSON_LOG], out, arm="bf16")  # the same samples twice
    assert (again.written, again.already_present) == (0, 12)
    before = out.read_bytes()
    bad = tmp_path / "bad.json"
    bad.write_text(JSON_LOG.read_text("utf-8")[:-5000])
    with pytest.raises(InputError):
        import_inspect([EVAL_LOG, bad], out, arm="int4")
    assert out.read_bytes() == before  # nothing of the good log was kept either


def test_error_map_is_data(tmp_path: Path) -> None:
    custom = tmp_path / "map.yaml"
    text = (FIXTURES.parents[2] / "src/flatscore/formats/inspect_errors.yaml").read_text()
    custom.write_text(text.replace("timeout: other", "timeout: precondition", 1))
    rules = load_rules()
    default = Counter[str]()
    changed = Counter[str]()
    for ep in read_inspect(EVAL_LOG):
        default.update(episode_facts(ep, rules).channels)
    for ep in read_inspect(EVAL_LOG, error_map=load_error_map(custom)):
        changed.update(episode_facts(ep, rules).channels)
    assert (changed["other"], changed["precondition"]) == (
        default["other"] - 2,
        default["precondition"] + 2,
    )
    broken = tmp_path / "broken.yaml"
    broken.write_text(text.replace("timeout: other", "timeout: slow", 1))
    with pytest.raises(InputError, match="unknown channel 'slow'") as exc:
        load_error_map(broken)
    assert exc.value.field == "tool_errors"


def test_export_reads_back_in_inspect(tmp_path: Path) -> None:
    """Inspect's own reader sees the messages and scores of the source log again."""
    run = tmp_path / "run.jsonl"
    import_inspect([EVAL_LOG], run, arm="bf16", model="toy")
    episodes = list(read_episodes(run))
    [log] = export_inspect(episodes, tmp_path / "out")
    assert Path(log.path).name == "orders__bf16.eval" and log.samples == 6
    header = read_eval_log(log.path, header_only=True)
    assert header.status == "success" and header.eval.model == "toy"
    assert header.results is not None
    assert header.results.scores[0].metrics["accuracy"].value == pytest.approx(2 / 6)
    source = {(s.id, s.epoch): s for s in read_eval_log_samples(str(EVAL_LOG))}
    facts = {(e.task_id, e.trial + 1): episode_facts(e, load_rules()) for e in episodes}
    back = list(read_eval_log_samples(log.path))
    assert len(back) == 6
    for s in back:
        orig = source[(s.id, s.epoch)]
        assert [m.role for m in s.messages] == [m.role for m in orig.messages]
        assert [m.text for m in s.messages if m.role != "tool"] == [
            m.text for m in orig.messages if m.role != "tool"
        ]
        assert [
            (c.id, c.function, c.arguments)
            for m in s.messages
            for c in (getattr(m, "tool_calls", None) or [])
        ] == [
            (c.id, c.function, c.arguments)
            for m in orig.messages
            for c in (getattr(m, "tool_calls", None) or [])
        ]
        tools_back = [m for m in s.messages if m.role == "tool"]
        tools_orig = [m for m in orig.messages if m.role == "tool"]
        assert [(m.tool_call_id, m.error is None) for m in tools_back] == [
            (m.tool_call_id, m.error is None) for m in tools_orig
        ]
        assert [m.error.message if m.error else m.text for m in tools_back] == [
            m.error.message if m.error else m.text for m in tools_orig
        ]
        assert s.scores is not None and orig.scores is not None
        assert s.scores["success"].value == orig.scores["cancelled"].value
        f = facts[(s.id, s.epoch)]
        assert s.scores["failed_calls"].value == f.agent_failed
        assert s.scores["channels"].value == f.channels
        assert s.metadata["failed_calls"] == f.agent_failed
        flagged = [m.metadata["flatscore_channel"] for m in tools_back if m.error is not None]
        assert Counter(flagged) == Counter({k: v for k, v in f.channels.items() if v})


def test_export_then_import_restores_the_episodes(tmp_path: Path) -> None:
    original = sorted(read_inspect(EVAL_LOG, arm="int4", study="s1"), key=lambda e: e.episode_id)
    [log] = export_inspect(original, tmp_path)
    back = sorted(read_inspect(log.path), key=lambda e: e.episode_id)

    def comparable(e: Episode) -> dict[str, Any]:
        return e.model_dump(exclude={"source": True})

    assert [comparable(e) for e in back] == [comparable(e) for e in original]


def test_eval_logs_load_like_runs() -> None:
    """`load_runs` (what analyze and the exports read through) takes `.eval` logs directly."""
    from flatscore.formats import load_runs

    direct = list(load_runs([EVAL_LOG]))
    assert [e.model_dump() for e in direct] == [e.model_dump() for e in read_inspect(EVAL_LOG)]


def test_sample_endings_map_to_termination_reasons() -> None:
    """limits.eval: Inspect stopped one sample at its message limit; the other's tool raised
    an error that is not a ToolError, so Inspect failed the sample (fail_on_error=False)."""
    raw = {s["id"]: s for s in raw_samples(FIXTURES / "limits.eval")}
    assert raw["loop-A1"]["limit"]["type"] == "message" and raw["crash-A1"]["error"]
    eps = {e.task_id: e for e in read_inspect(FIXTURES / "limits.eval")}
    loop, crash = eps["loop-A1"], eps["crash-A1"]
    assert loop.termination_reason.value == "max_steps" and not loop.succeeded
    assert loop.metadata["inspect_limit"] == "message"
    assert crash.termination_reason.value == "infrastructure_error"
    assert crash.is_infrastructure_error and crash.reward is None  # Inspect did not score it
    assert "the order database went away" in crash.metadata["inspect_error"]


def test_errored_samples_are_counted_for_a_warning(tmp_path: Path) -> None:
    summary = import_inspect([FIXTURES / "limits.eval"], tmp_path / "run.jsonl")
    assert summary.by_termination == {"infrastructure_error": 1, "max_steps": 1}
    assert (summary.inspect_errors, summary.written, summary.crashes) == (1, 2, {})
    assert [f.status for f in summary.files] == ["success"]


def test_export_writes_an_episode_given_twice_once(tmp_path: Path) -> None:
    episodes = list(read_inspect(EVAL_LOG, arm="bf16"))
    [log] = export_inspect(episodes + episodes, tmp_path)
    assert log.samples == 6
    assert len(list(read_eval_log_samples(log.path))) == 6


def test_missing_extra_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from flatscore.formats.inspect_log import require_inspect

    monkeypatch.setitem(sys.modules, "inspect_ai", None)  # what an install without it sees
    with pytest.raises(InputError, match=r"pip install 'flatscore\[inspect\]'"):
        require_inspect()
