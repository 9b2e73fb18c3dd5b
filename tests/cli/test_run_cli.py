"""`flatscore run` through the real CLI, in a subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_runner import flatscore
from flatscore.store.jsonl import read_episodes


def test_run_writes_episodes_with_the_run_options(tmp_path: Path) -> None:
    out = tmp_path / "runs" / "x.jsonl"
    done = flatscore(
        "run",
        "--domain",
        "telecom",
        "--agent",
        "oracle",
        "--user",
        "scripted",
        "--split",
        "test",
        "--trials",
        "1",
        "--out",
        out,
        "--max-errors",
        "5",
        "--max-steps",
        "30",
        "--seed",
        "42",
        "--arm",
        "ref",
        "--study",
        "s1",
        "--no-progress",
    )
    assert done.returncode == 0, done.stderr
    assert "114 episodes written" in done.stdout and "success 114/114" in done.stdout
    episodes = list(read_episodes(out))
    assert len(episodes) == 114
    ep = episodes[0]
    assert (ep.study, ep.arm, ep.model, ep.domain, ep.seed, ep.split) == (
        "s1",
        "ref",
        "oracle",
        "telecom",
        42,
        "test",
    )
    assert ep.error_budget.max_errors == 5 and ep.metadata["max_steps"] == 30


def test_task_filter_and_resume(tmp_path: Path) -> None:
    out = tmp_path / "x.jsonl"
    args = [
        "run",
        "--domain",
        "retail",
        "--split",
        "all",
        "--task",
        "cancel_00",
        "--task",
        "cancel_01",
        "--out",
        out,
        "--no-progress",
    ]
    assert flatscore(*args).returncode == 0
    assert len(list(read_episodes(out))) == 2
    again = flatscore(*args, "--resume")
    assert again.returncode == 0 and "0 episodes written, 2 already there" in again.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--agent", "gpt9"], "unknown agent 'gpt9'"),
        (["--domain", "airline"], "unknown domain 'airline'"),
        (["--user", "llm"], "needs a model backend"),
        (["--count", "some"], "field '--count'"),
        (["--split", "dev"], "field 'split'"),
        (["--agent-opt", "slip_rate"], "expected KEY=VALUE"),
        (["--agent-opt", "slip_rat=0.1"], "unexpected keyword argument 'slip_rat'"),
        (["--agent-opt", "slip_rate=3"], "slip_rate must be in [0, 1]"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    done = flatscore("run", "--out", tmp_path / "x.jsonl", *args)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_existing_file_needs_resume(tmp_path: Path) -> None:
    out = tmp_path / "x.jsonl"
    out.write_text("\n")
    out.write_text('{"partial": ')
    done = flatscore("run", "--out", out, "--domain", "retail")
    assert done.returncode == 2 and "pass --resume" in done.stderr


def test_agent_options_reach_the_agent(tmp_path: Path) -> None:
    out = tmp_path / "slips.jsonl"
    done = flatscore(
        "run", "--domain", "telecom", "--agent-opt", "slip_rate=1.0", "--out", out, "--no-progress"
    )
    assert done.returncode == 0, done.stderr
    episodes = list(read_episodes(out))
    assert all(e.succeeded for e in episodes)
    assert all(e.metadata["failed_calls"] > 0 for e in episodes)


def test_repair_flag_wraps_the_agent_and_labels_the_arm(tmp_path: Path) -> None:
    """An oracle that first invents a tool name at every action: with --repair each such
    failure gets one repair instruction, logged and marked, and the arm says +repair."""
    out = tmp_path / "r.jsonl"
    done = flatscore(
        "run", "--domain", "retail", "--task", "cancel_00", "--agent", "oracle",
        "--agent-opt", "slip_rate=1.0", "--agent-opt", 'slip_kinds=["invented"]',
        "--repair", "--repair-attempts", "2", "--out", out, "--no-progress",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (ep,) = read_episodes(out)
    assert ep.arm == "oracle+repair"
    meta = ep.metadata["repair"]
    assert meta["enabled"] and meta["channels"] == ["unknown_tool"] and meta["attempts"] == 2
    injected = [m for m in ep.messages if m.repair]
    failed = [m for m in ep.messages if m.tool_result is not None and m.tool_result.error]
    assert len(injected) == meta["instructions"] == len(failed) > 0


def test_repair_channels_are_validated(tmp_path: Path) -> None:
    done = flatscore(
        "run", "--repair", "--repair-channels", "nonsense", "--out", tmp_path / "x.jsonl"
    )  # fmt: skip
    assert done.returncode == 2 and "--repair-channels" in done.stderr
    assert "Traceback" not in done.stderr
