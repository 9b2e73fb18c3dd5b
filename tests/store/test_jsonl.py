"""The JSONL store: append/read round trip and the partial-last-line rules."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis_builders import cell
from flatscore.episode import (
    Episode,
    Message,
    TerminationReason,
    ToolCall,
    ToolResult,
)
from flatscore.errors import InputError
from flatscore.store.jsonl import EpisodeWriter, finished_episode_ids, read_episodes
from flatscore.store.redaction import scrub

names = st.text(min_size=1, max_size=10)


@st.composite
def episodes(draw: st.DrawFn) -> Episode:
    task, trial = draw(names), draw(st.integers(0, 50))
    call = ToolCall(
        id="c1", name=draw(names), arguments=draw(st.dictionaries(names, names) | names)
    )
    return Episode(
        **cell(task, trial),
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
        **cell(f"t{i}"),
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
        # an id already there is never written again; what is read is what was written, with
        # credential-shaped text masked (`{"APIKEY": "0"}` is read as `{"APIKEY": "***"}`)
        written = [Episode.model_validate_json(scrub(e.model_dump_json())) for e in first]
        assert list(read_episodes(path)) == written
        # an infrastructure error is no result: resume runs it again
        assert finished_episode_ids(path) == {
            e.episode_id for e in first if not e.is_infrastructure_error
        }


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


def _failed(i: int) -> Episode:
    return simple(i).model_copy(
        update={"termination_reason": TerminationReason.INFRASTRUCTURE_ERROR, "reward": None}
    )


def test_a_runs_writer_appends_a_new_attempt_of_an_infrastructure_error(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with EpisodeWriter(path) as w:
        w.write_all([simple(0), _failed(1)])
    assert finished_episode_ids(path) == {simple(0).episode_id}
    with EpisodeWriter(path) as w:  # an import's writer: every id held is refused
        assert not w.write(simple(1))
    with EpisodeWriter(path, reruns=True) as w:  # a run's writer: failed attempts are not
        assert w.attempted == {simple(0).episode_id, simple(1).episode_id}
        assert not w.write(simple(0))
        assert w.write(_failed(1))  # failed again: written, still open
        assert w.write(simple(1))
        assert not w.write(simple(1))  # a result: held from now on
    reasons = [(e.task_id, e.termination_reason.value) for e in read_episodes(path)]
    assert reasons == [
        ("t0", "user_stop"),
        ("t1", "infrastructure_error"),
        ("t1", "infrastructure_error"),
        ("t1", "user_stop"),
    ]
    assert finished_episode_ids(path) == {simple(0).episode_id, simple(1).episode_id}


def test_missing_run_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        list(read_episodes(tmp_path / "nope.jsonl"))
    assert finished_episode_ids(tmp_path / "nope.jsonl") == set()


# --- hostile and damaged files (issue 14) ---------------------------------------------------


def _line(ep: Episode) -> str:
    return ep.model_dump_json()


def test_a_complete_last_line_without_newline_is_read_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text(_line(simple(0)) + "\n" + _line(simple(1)))  # edited by hand: no final \n
    assert [e.task_id for e in read_episodes(path)] == ["t0", "t1"]
    with EpisodeWriter(path) as w:  # a writer terminates it instead of cutting it off
        w.write(simple(2))
    assert [e.task_id for e in read_episodes(path)] == ["t0", "t1", "t2"]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"episode_id": "\xc0\xaf"}\n', "not UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000 + b"\n", "nested deeper"),
        (b'{"a": 1' + b"0" * 5000 + b"}\n", "not valid JSON"),
    ],
)
def test_bad_bytes_are_one_input_error(tmp_path: Path, raw: bytes, message: str) -> None:
    path = tmp_path / "run.jsonl"
    path.write_bytes(_line(simple(0)).encode() + b"\n" + raw)
    with pytest.raises(InputError, match=message) as info:
        list(read_episodes(path))
    assert info.value.file == str(path) and info.value.record == "line 2"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"reward": float("nan")}, "reward"),
        ({"reward": float("inf")}, "reward"),
        ({"reward": 5.0}, "reward"),
        ({"reward": -1.0}, "reward"),
        ({"trial": -1}, "trial"),
        ({"schema_version": 99}, "schema_version"),
        ({"error_budget": {"max_errors": 10**12, "counted": "all"}}, "error_budget.max_errors"),
    ],
)
def test_out_of_range_values_are_refused(
    tmp_path: Path, change: dict[str, object], field: str
) -> None:
    import json

    data = json.loads(_line(simple(0)))
    data.update(change)
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps(data) + "\n")  # json writes NaN/Infinity literals
    with pytest.raises(InputError) as info:
        list(read_episodes(path))
    assert info.value.field == field and info.value.record == "line 1 (episode " + (
        simple(0).episode_id + ")"
    )


def test_special_files_are_refused(tmp_path: Path) -> None:
    import os

    (tmp_path / "x.jsonl").mkdir()
    with pytest.raises(InputError, match="is a directory"):
        list(read_episodes(tmp_path / "x.jsonl"))
    fifo = tmp_path / "f.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="FIFO"):  # would block forever if opened
        list(read_episodes(fifo))
    with pytest.raises(InputError, match="not a file"):
        list(read_episodes("/dev/null"))


def test_a_second_writer_is_refused_naming_the_holder(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    path = tmp_path / "run.jsonl"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from flatscore.store.jsonl import EpisodeWriter\n"
            "w = EpisodeWriter(sys.argv[1]); print('locked', flush=True); time.sleep(60)",
            str(path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(InputError, match=f"PID {holder.pid}\\b") as info:
            EpisodeWriter(path)
        assert info.value.file == str(path) and "\n" not in info.value.one_line()
    finally:
        holder.kill()
        holder.wait()
    with EpisodeWriter(path) as w:  # the kernel released a killed holder's lock
        w.write(simple(0))
    assert not os.path.exists(str(path) + ".lock")  # and the lock file goes with its holder
    with EpisodeWriter(path) as w, pytest.raises(InputError, match=f"PID {os.getpid()}"):
        EpisodeWriter(path)  # even within one process


def test_atomic_writer_appends_all_or_nothing(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    with EpisodeWriter(path) as w:
        w.write(simple(0))
    before = path.read_bytes()
    with pytest.raises(RuntimeError), EpisodeWriter(path, atomic=True) as w:
        w.write(simple(1))
        w.write(simple(2))
        raise RuntimeError("the input went bad halfway")
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.jsonl"]  # no temp file left
    with EpisodeWriter(path, atomic=True) as w:
        assert w.write(simple(1)) and not w.write(simple(0))  # an id already there: skipped
    assert [e.task_id for e in read_episodes(path)] == ["t0", "t1"]


def test_secrets_never_reach_the_run_file(tmp_path: Path) -> None:
    from flatscore.store.redaction import register_secret

    register_secret("sk-configured-key-123456")
    ep = simple(0).model_copy(
        update={
            "metadata": {
                "error": "agent: BackendError: client error 401: "
                '{"echo": {"Authorization": "Bearer sk-live-abcdef123456"}} '
                "key sk-configured-key-123456"
            }
        }
    )
    path = tmp_path / "run.jsonl"
    with EpisodeWriter(path) as w:
        w.write(ep)
    text = path.read_text()
    assert "sk-live-abcdef123456" not in text and "sk-configured-key-123456" not in text
    assert "***" in text


def test_write_line_keeps_the_stored_bytes(tmp_path: Path) -> None:
    """`write_line` appends an episode as the line it was read from (the run archive's
    unpack), not re-serialised: a line with its keys in another order, or without fields the
    schema has since gained, comes back byte for byte; a known id is skipped; secrets are
    still masked."""
    from flatscore.store.jsonl import episode_lines

    source = tmp_path / "source.jsonl"
    with EpisodeWriter(source) as writer:
        writer.write(simple(0))
    data = json.loads(source.read_text("utf-8"))
    data.pop("timing", None)
    data["metadata"] = {"note": "Authorization: Bearer sk-abcdefghijkl"}
    reordered = json.dumps(dict(reversed(list(data.items()))), ensure_ascii=False)
    source.write_text(reordered + "\n", "utf-8")
    ((episode, line),) = list(episode_lines(source))
    assert line == reordered

    target = tmp_path / "target.jsonl"
    with EpisodeWriter(target) as writer:
        assert writer.write_line(episode, line)
        assert not writer.write_line(episode, line)  # its id is there already
    written = target.read_text("utf-8")
    assert written == reordered.replace("Bearer sk-abcdefghijkl", "***") + "\n"
