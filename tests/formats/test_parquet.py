"""Parquet export: one row per episode and one per tool call, values as in the episodes."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import flatscore.formats.parquet as export
from flatscore.episode import Episode, Message, TerminationReason, ToolCall, ToolResult
from flatscore.formats.parquet import EPISODES_FILE, TOOL_CALLS_FILE, export_parquet
from flatscore.formats.tau2 import read_tau2

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tau2"


def fixture_episodes() -> list[Episode]:
    return [
        ep
        for path in sorted(FIXTURES.glob("v*/*.json"))
        for ep in read_tau2(path, arm=path.parent.name)
    ]


def test_row_counts_equal_episodes_and_calls(tmp_path: Path) -> None:
    eps = fixture_episodes()
    counts = export_parquet(eps, tmp_path)
    n_calls = sum(len(m.tool_calls) for e in eps for m in e.messages)
    episodes = pq.read_table(tmp_path / EPISODES_FILE)
    calls = pq.read_table(tmp_path / TOOL_CALLS_FILE)
    assert (counts.episodes, counts.tool_calls) == (len(eps), n_calls)
    assert (episodes.num_rows, calls.num_rows) == (len(eps), n_calls)
    assert episodes.column("episode_id").to_pylist() == [e.episode_id for e in eps]
    rows = episodes.to_pylist()
    assert sum(r["n_agent_tool_calls"] + r["n_user_tool_calls"] for r in rows) == n_calls
    assert [r["infrastructure_error"] for r in rows] == [e.is_infrastructure_error for e in eps]


def test_tool_call_rows_carry_results(tmp_path: Path) -> None:
    (ep,) = read_tau2(FIXTURES / "v0.2" / "telecom.json", arm="int4")
    export_parquet([ep], tmp_path)
    rows = pq.read_table(tmp_path / TOOL_CALLS_FILE).to_pylist()
    assert [r["call_index"] for r in rows] == list(range(len(rows)))
    assert [(r["requestor"], r["name"], r["error"]) for r in rows] == [
        ("agent", "toggle_roaming", True),
        ("agent", "get_customer_by_phone", False),
        ("user", "enable_roaming", True),
        ("user", "toggle_roaming", False),
        ("user", "run_speed_test", False),
    ]
    assert rows[0]["error_text"] == "Error: Tool 'toggle_roaming' not found."
    assert rows[1]["error_text"] is None
    assert json.loads(rows[1]["arguments"]) == {"phone_number": "555-123-2002"}
    assert {(r["arm"], r["domain"], r["trial"]) for r in rows} == {("int4", "telecom", 0)}
    (erow,) = pq.read_table(tmp_path / EPISODES_FILE).to_pylist()
    assert (erow["n_agent_tool_calls"], erow["n_failed_agent_calls"]) == (2, 1)
    assert (erow["n_user_tool_calls"], erow["n_failed_user_calls"]) == (3, 1)
    assert erow["succeeded"] and erow["tool_list_source"] == "bundled"


def test_raw_arguments_and_unanswered_calls(tmp_path: Path) -> None:
    ep = Episode(
        episode_id="e",
        study="s",
        arm="a",
        model="m",
        domain="d",
        task_id="t",
        termination_reason=TerminationReason.MAX_STEPS,
        messages=[
            Message(
                role="assistant",
                tool_calls=[
                    ToolCall(id="1", name="f", arguments="{broken"),
                    ToolCall(id="2", name="g", arguments={}),
                ],
            ),
            Message(role="tool", tool_result=ToolResult(call_id="1", error=True, text="bad")),
        ],
    )
    export_parquet([ep], tmp_path)
    rows = pq.read_table(tmp_path / TOOL_CALLS_FILE).to_pylist()
    assert (rows[0]["arguments"], rows[0]["arguments_parsed"], rows[0]["error"]) == (
        "{broken",
        False,
        True,
    )
    assert (rows[1]["has_result"], rows[1]["error"]) == (False, None)


def test_batches_are_written_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    eps = fixture_episodes()
    monkeypatch.setattr(export, "BATCH_ROWS", 2)  # force several row groups
    export_parquet(eps, tmp_path)
    table = pq.read_table(tmp_path / EPISODES_FILE)
    assert table.column("episode_id").to_pylist() == [e.episode_id for e in eps]
    assert pq.ParquetFile(tmp_path / EPISODES_FILE).num_row_groups > 1


def test_empty_export_writes_empty_tables(tmp_path: Path) -> None:
    counts = export_parquet([], tmp_path / "out")
    assert counts.episodes == 0
    assert pq.read_table(tmp_path / "out" / EPISODES_FILE).num_rows == 0
    assert pq.read_table(tmp_path / "out" / TOOL_CALLS_FILE).num_rows == 0


def test_tool_call_rows_carry_the_analysis_channel_and_recovery(tmp_path: Path) -> None:
    """The per-call columns agree with the analysis' own counts (`analysis.facts`) on every
    fixture episode: failed agent calls per channel, recoveries, failed-call numbering."""
    from collections import Counter

    from flatscore.analysis.channels import UNKNOWN_TOOL_LEAVES, load_rules
    from flatscore.analysis.facts import episode_facts

    eps = fixture_episodes()
    export_parquet(eps, tmp_path)
    rows = pq.read_table(tmp_path / TOOL_CALLS_FILE).to_pylist()
    rules = load_rules()
    checked = start = 0
    for ep in eps:  # rows come in episode order (ids repeat across fixture files)
        n = sum(len(m.tool_calls) for m in ep.messages)
        mine, start = rows[start : start + n], start + n
        facts = episode_facts(ep, rules)
        counted = Counter(r["channel"] for r in mine if r["channel"])
        assert {ch: n for ch, n in facts.channels.items() if n and ch != "malformed_output"} == (
            dict(counted)
        )
        assert sum(bool(r["recovered"]) for r in mine) == facts.recovered
        assert sum(r["recovered"] is not None for r in mine) == facts.failed_with_next
        numbers = [r["failed_call_number"] for r in mine if r["error"]]
        assert numbers == list(range(1, len(numbers) + 1))
        for r in mine:
            assert (r["channel"] is None) == (not r["error"] or r["requestor"] == "user")
            family = "unknown_tool" if r["channel"] in UNKNOWN_TOOL_LEAVES else r["channel"]
            assert r["channel_family"] == family
        checked += len(counted)
    assert checked > 0  # some fixture episode has failed agent calls
    (first,) = [r for r in rows if r["error_text"] == "Error: Tool 'toggle_roaming' not found."][:1]
    assert first["channel_family"] == "unknown_tool"


def test_an_existing_file_as_out_is_bad_input(tmp_path: Path) -> None:
    from flatscore.errors import InputError

    a_file = tmp_path / "tables"
    a_file.write_text("")
    with pytest.raises(InputError, match="expected a folder"):
        export_parquet([], a_file)
