"""The JSONL store: append/read round trip and the partial-last-line rules."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flatscore.episode import (
    Episode,
    Message,
    TerminationReason,
    ToolCall,
    ToolResult,
    make_episode_id,
)
from flatscore.errors import InputError
from flatscore.store import EpisodeWriter, finished_episode_ids, read_episodes

names = st.text(min_size=1, max_size=10)


@st.composite
def episodes(draw: st.DrawFn) -> Episode:
    task, trial = draw(names), draw(st.integers(0, 50))
    call = ToolCall(
        id="c1", name=draw(names), arguments=draw(st.dictionaries(names, names) | names)
    )
    return Episode(
        episode_id=make_episode_id("s", "a", "d", task, trial),
        study="s",
        arm="a",
        model="m",
        domain="d",
        task_id=task,
        trial=trial,
        messages=[
            Message(role="user", content=draw(st.text(max_size=30))),
            Message(role="assistant", tool_calls=[call]),
            Message(
                role="tool",
                tool_result=ToolResult(call_id="c1", error=draw(st.booleans()), text=draw(names)),
            ),
        ],
        termination_reason=draw(st.sampled_from(list(TerminationReason))),
        reward=draw(st.none() | st.sampled_from([0.0, 0.5, 1.0])),
    )


def simple(i: int) -> Episode:
    return Episode(
        episode_id=make_episode_id("s", "a", "d", f"t{i}", 0),
        study="s",
        arm="a",
        model="m",
        domain="d",
        task_id=f"t{i}",
        termination_reason=TerminationReason.USER_STOP,
        reward=1.0,
    )


@settings(max_examples=40, deadline=None)
@given(st.lists(episodes(), max_size=6), st.integers(0, 6))
def test_append_then_read_round_trips(eps: list[Episode], split: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sub" / "run.jsonl"
        with EpisodeWriter(path) as w:  # two writer sessions: appends, never truncates
            w.write_all(eps[:split])
        with EpisodeWriter(path) as w:
            w.write_all(eps[split:])
        first: list[Episode] = []
        for e in eps:  # the first episode of each id wins
            if all(f.episode_id != e.episode_id for f in first):
                first.append(e)
        assert list(read_episodes(path)) == first  # an id already there is never written again
        assert finished_episode_ids(path) == {e.episode_id for e in eps}


def test_partial_last_line_is_skipped_then_cut(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with EpisodeWriter(path) as w:
        w.write_all([simple(0), simple(1)])
    line = simple(2).model_dump_json()
    with path.open("a", encoding="utf-8") as fh:  # a writer killed mid-episode
        fh.write(line[: len(line) // 2])
    assert [e.task_id for e in read_episodes(path)] == ["t0", "t1"]
    assert finished_episode_ids(path) == {simple(0).episode_id, simple(1).episode_id}

    with EpisodeWriter(path) as w:
        w.write(simple(3))
    assert [e.task_id for e in read_episodes(path)] == ["t0", "t1", "t3"]
    assert path.read_bytes().endswith(b"\n")
    assert len(path.read_text().splitlines()) == 3


def test_a_file_that_is_only_a_partial_line(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text('{"episode_id": "x"')
    assert list(read_episodes(path)) == []
    with EpisodeWriter(path) as w:
        w.write(simple(0))
    assert [e.task_id for e in read_episodes(path)] == ["t0"]


def test_bad_line_names_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with EpisodeWriter(path) as w:
        w.write(simple(0))
    with path.open("a") as fh:
        fh.write('{"episode_id": "e9", "study": "s"}\n')
    with pytest.raises(InputError) as info:
        list(read_episodes(path))
    assert info.value.file == str(path)
    assert info.value.record == "line 2 (episode e9)"
    assert info.value.field is not None


def test_missing_run_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        list(read_episodes(tmp_path / "nope.jsonl"))
    assert finished_episode_ids(tmp_path / "nope.jsonl") == set()
