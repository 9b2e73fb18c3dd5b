"""Evaluation summaries: known answers from episodes whose failures we know."""

from __future__ import annotations

from pathlib import Path

import pytest

import flatscore.train.data  # noqa: F401  registers `slip-oracle` (training data's agent)
from flatscore.domains import get_domain
from flatscore.run.quick import QuickRun, run_quick
from flatscore.train.evaluate import summarize


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
    from flatscore.train.evaluate import EVAL_CONCURRENCY, eval_study

    assert EVAL_CONCURRENCY >= 16
    assert eval_study("ref").concurrency == EVAL_CONCURRENCY
    assert eval_study("int4", concurrency=3).concurrency == 3
    cli_default = inspect.signature(eval_embedded_command).parameters["concurrency"].default
    assert cli_default == EVAL_CONCURRENCY


def test_channel_rates_are_the_analysis_task_weighted_rates() -> None:
    """Known answer where pooling differs: task a has two trials (4 calls, 2 bad arguments;
    2 calls, none failed), task b one (4 calls, none failed) plus an infrastructure error.
    Task-weighted: mean 1 failed / (mean 3 + 4 calls) = 1/7; call-pooled it would be 2/10
    (5/13 with the infrastructure error). The rate is analysis.json's."""
    from analysis_builders import episode
    from flatscore.analysis.analyze import analyze
    from flatscore.train.evaluate import summarize_episodes

    bad, ok = ("get_user", "bad_arguments"), ("get_order", "ok")
    episodes = [
        episode("ref", "a", 0, [bad, bad, ok, ok]),
        episode("ref", "a", 1, [ok, ok]),
        episode("ref", "b", 0, [ok] * 4),
        episode("ref", "b", 1, [bad] * 3, termination="infrastructure_error"),
    ]
    [s] = summarize_episodes(episodes)
    assert (s.agent_calls, s.channels["bad_arguments"]) == (13, 5)  # counts: every episode
    assert s.channel_rate("bad_arguments") == pytest.approx(1 / 7)
    assert s.channel_rate("invented") == 0.0
    [arm] = analyze(episodes).cells[0].arms
    assert s.channel_rates == {c: arm.channels[c].rate for c in s.channel_rates}


def test_channel_rates_without_usable_episodes_are_none() -> None:
    from analysis_builders import episode
    from flatscore.train.evaluate import summarize_episodes

    [s] = summarize_episodes([episode("ref", "a", 0, termination="infrastructure_error")])
    assert set(s.channel_rates.values()) == {None}
