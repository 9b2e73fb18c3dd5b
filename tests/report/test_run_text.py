"""A study run's lines in words (`report.run_text`): known answers, the text `flatscore run`
printed before the words moved here, byte for byte."""

from __future__ import annotations

from flatscore.report.run_text import decided_line, outcome_line, ran_ahead_line, state_line


def test_a_decision_at_a_look() -> None:
    line = decided_line("oracle", "retail", "slips", "ref", "damaged", 12, 24)
    assert line == "oracle · retail · slips vs ref: damaged after 12 of 24 tasks"


def test_each_cells_state_decided_arms_sorted_then_the_open_ones() -> None:
    decided = {"slips": ("damaged", 12), "int8": ("no damage detected", 6)}
    assert state_line("m", "retail", decided, {"b", "a"}) == (
        "m · retail: decided: int8 no damage detected at 6, slips damaged at 12; open: a, b"
    )
    assert state_line("m", "telecom", {}, []) == "m · telecom: decided: none; open: none"


def test_episodes_run_ahead_of_their_look() -> None:
    assert ran_ahead_line(14, 3, 0, 2) == (
        "ran ahead of their look: 14 episodes written once the look was read, 3 discarded "
        "(their arm was decided first), 0 kept from a stopped run, 2 held for a look not yet "
        "read"
    )


def test_a_runs_last_line_names_the_reruns_only_when_there_are_some() -> None:
    assert outcome_line(8, 2, 12.6, {"done": 5, "max_steps": 3}, 0) == (
        "8 episodes run, 2 already there (13 s); terminations {'done': 5, 'max_steps': 3}"
    )
    assert outcome_line(8, 0, 0.4, {}, 3) == (
        "8 episodes run, 0 already there (0 s); terminations {}; 3 run again after an "
        "infrastructure error"
    )
