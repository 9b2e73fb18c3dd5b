"""Words for people are the report's and the command line's (issue #65): the analysis
returns data, `flatscore.report` says it. This pins the rule on `flatscore.analysis`: an
f-string that builds a phrase (its literal text has a space) is an error message (inside a
`raise` or an `...Error(...)` call), or it is one of the places listed below, each with why
it is still there. A new sentence in the analysis fails here: give it a code or a field and
word it in `report/` (e.g. `report.notes_text`, `report.warning_text`)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ANALYSIS = Path(__file__).resolve().parents[1] / "src" / "flatscore" / "analysis"

ALLOWED: dict[tuple[str, str], str] = {
    # Error messages built apart from their `raise` (returned to the parser that raises).
    ("budget.py", "problem"): "a bad --budgets value's message (raised by parse_ranges)",
    ("trials.py", "problem"): "a bad --trial-range value's message (raised by parse_ranges)",
    ("settings.py", "_budget_text"): "a validator's error message",
    ("identity.py", "origin"): "where an episode was read, for the duplicate error and warning",
    # Labels, not sentences.
    ("comparison.py", "correct_channels"): "'model / domain / arm: channel' family members",
    ("settings.py", "margin_text"): "'±7.5 points', the settings' own rendering of the margin",
    # Still words in the analysis, to move to report/: each is a text field of analysis.json
    # or a message of reading.
    ("analyze.py", "_cell"): "cell warnings (reference missing, tasks left out of pairing)",
    ("identity.py", "unique_episodes"): "duplicate and superseded-attempt warnings of reading",
    ("recorded.py", "recorded_settings"): "run files that record different study settings",
    ("repair_effect.py", "repair_effects"): "the repair effect's warnings",
    ("sequential_power.py", "pilot_from_episodes"): "the pilot's coupling source",
    ("paired_score.py", "<module>"): "TEST, the paired test's description in analysis.json",
}


def _phrases(path: Path) -> set[tuple[str, str]]:
    """(file, function) of every phrase-building f-string that is not an error message."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.JoinedStr):
            continue
        literal = "".join(
            v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)
        )
        if " " not in literal.strip():
            continue  # a key or a number's form ('S{k}', '{x:.2f}'), not a phrase
        func, up, error = None, node, False
        while up in parents:
            up = parents[up]
            if isinstance(up, ast.Raise):
                error = True
            if isinstance(up, ast.Call):
                name = getattr(up.func, "id", getattr(up.func, "attr", ""))
                error = error or name.endswith("Error") or name == "ReferenceUndecided"
            if func is None and isinstance(up, ast.FunctionDef | ast.AsyncFunctionDef):
                func = up.name
        if not error:
            found.add((path.name, func or "<module>"))
    return found


@functools.cache
def _found() -> frozenset[tuple[str, str]]:
    """Every module of the analysis, parsed once for both tests."""
    return frozenset().union(*(_phrases(p) for p in sorted(ANALYSIS.glob("*.py"))))


def test_the_analysis_builds_no_sentences_but_the_listed_ones() -> None:
    found = _found()
    assert found <= set(ALLOWED), f"words built in the analysis: {sorted(found - set(ALLOWED))}"


def test_the_list_names_only_places_that_still_build_words() -> None:
    """A place moved to the report leaves the list with it."""
    found = _found()
    assert set(ALLOWED) <= found, f"listed but gone: {sorted(set(ALLOWED) - found)}"
