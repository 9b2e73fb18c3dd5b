"""flatscore.report.reproduction's words for a comparison with the archive (known answers:
the text `flatscore demo`'s banner has always carried)."""

from __future__ import annotations

from flatscore.report.reproduction import (
    divergence_text,
    reproduced_count,
    reproduction_headline,
)
from flatscore.store.compare import Divergence, Reproduction

WHERE = {"episode_id": "ep-7", "arm": "int4", "domain": "retail", "task_id": "status_00"}


def test_the_count_of_episodes_reproduced() -> None:
    r = Reproduction(archive="a", checked=45, identical=44, not_archived=[], episodes=[])
    assert reproduced_count(r) == "44 of 45 episodes reproduced exactly on this machine"


def test_a_first_difference_in_one_line() -> None:
    in_text = Divergence(
        **WHERE, trial=0, turn=3, field="text", position=12, archived="ab'c", live="abd"
    )
    assert divergence_text(in_text) == (
        "int4 · retail · status_00 · trial 1 (ep-7), turn 3, text, character 12: "
        "archived \"ab'c\", live 'abd'"
    )
    outcome = Divergence(
        **WHERE, trial=1, turn=None, field="reward", position=None, archived="1.0", live="0.0"
    )
    assert divergence_text(outcome) == (
        "int4 · retail · status_00 · trial 2 (ep-7), episode, reward: archived '1.0', live '0.0'"
    )


def test_the_headline_adds_the_first_difference_or_what_the_archive_lacks() -> None:
    first = Divergence(
        **WHERE, trial=0, turn=None, field="seed", position=None, archived="1", live="2"
    )
    differs = Reproduction(
        archive="a", checked=3, identical=2, not_archived=[], episodes=[], first_divergence=first
    )
    assert reproduction_headline(differs) == (
        "2 of 3 episodes reproduced exactly on this machine; the first difference: "
        "int4 · retail · status_00 · trial 1 (ep-7), episode, seed: archived '1', live '2'"
    )
    lacks = Reproduction(
        archive="a", checked=3, identical=1, not_archived=["ep-8", "ep-9"], episodes=[]
    )
    assert reproduction_headline(lacks) == (
        "1 of 3 episodes reproduced exactly on this machine; 2 not in the archive (ep-8, ...)"
    )
