"""The gate's warning that it corrected over fewer comparisons than the study it reads
(`report.gate_text.family_note`), from the study's recorded count and the gate's own."""

from __future__ import annotations

from flatscore.report.gate_text import family_note


def test_the_note_names_both_families_only_when_the_study_was_larger() -> None:
    assert family_note(12, 2) == (
        "the study decided its 12 comparisons together (one correction over all of them); the "
        "gate corrected over its own 2, so it may stop at another task (or decide otherwise) "
        "than `flatscore report` on the study's runs; given the study's runs (its folder as "
        "both inputs) it reads the study's decision"
    )
    assert family_note(2, 2) is None
    assert family_note(None, 2) is None
