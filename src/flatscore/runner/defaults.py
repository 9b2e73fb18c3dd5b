"""Run defaults: the one place both forms of `flatscore run` (the quick form and a study
file) take their defaults from, so the same agent gets the same budget however it is run.

They follow τ²-bench where τ² has a default: an episode stops at its 10th counted failed
tool call (`MAX_ERRORS`, τ²'s `max_errors`, so the analysis's default budget is K = 9),
counting agent and user errors (`COUNTED`), and trial `t` uses seed `SEED + t`. Documented
once, in docs/studies.md ("Run defaults").
"""

from __future__ import annotations

from typing import Literal

MAX_ERRORS = 10
"""Counted failed tool calls that end an episode (`too_many_errors`): τ²'s default."""

COUNTED: Literal["all", "agent"] = "all"
"""Which failed calls count against the budget: agent and user (`all`, like τ²) or `agent`."""

MAX_STEPS = 40
"""Messages after the greeting before an episode ends `max_steps`."""

SEED = 300
"""Base seed (τ²'s): trial `t` uses `SEED + t` for every task and arm."""

TRIALS = 1
SPLIT: Literal["train", "test", "all"] = "test"

CONCURRENCY = 2
"""Episodes in flight with the local executor (one torch thread each on CPU)."""

STUDY_NAME = "study"
"""The study label of a study file without `name`."""

QUICK_STUDY_NAME = "adhoc"
"""The study label of a quick-form run without `--study`."""
