"""Evaluation summaries: known answers from episodes whose failures we know."""

from __future__ import annotations

from pathlib import Path

from flatscore.agents.base import register_agent
from flatscore.domains import get_domain
from flatscore.embedded.data import SlipOracle
from flatscore.embedded.evaluate import summarize
from flatscore.runner.quick import QuickRun, run_quick

register_agent("slip-oracle", SlipOracle)  # training data only: registered for this test


def test_summary_counts_success_calls_and_channels(tmp_path: Path) -> None:
    out = tmp_path / "ref.jsonl"
    tasks = [t.id for t in get_domain("telecom").tasks("train")]
    # Seed 7 plants a mistake in every task (SlipOracle picks one step per task).
    quick = QuickRun.parse(
        agent="slip-oracle",
        agent_options={"mistake_seed": 7},
        domains=["telecom"],
        split="train",
        arm="ref",
        task_ids=tasks[:6],
    )
    run_quick(quick, out, progress=False)
    [s] = summarize(out)
    assert (s.arm, s.domain, s.episodes) == ("ref", "telecom", 6)
    assert s.succeeded == 6 and s.malformed == 0
    assert s.failed_calls == sum(s.channels.values()) == 6
    assert s.channels["role_confusion"] + s.channels["invented"] >= 1
    assert s.channel_rate("role_confusion") == s.channels["role_confusion"] / s.agent_calls
    assert s.terminations == {"user_stop": 6}


def test_eval_runs_episodes_in_flight_by_default() -> None:
    """One at a time pads every forward pass for one sequence: the evaluation batches."""
    import inspect

    from flatscore.cli.commands_train import eval_embedded_command
    from flatscore.embedded.evaluate import EVAL_CONCURRENCY, eval_study

    assert EVAL_CONCURRENCY >= 16
    assert eval_study("ref").concurrency == EVAL_CONCURRENCY
    assert eval_study("int4", concurrency=3).concurrency == 3
    cli_default = inspect.signature(eval_embedded_command).parameters["concurrency"].default
    assert cli_default == EVAL_CONCURRENCY
