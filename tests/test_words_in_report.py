"""Words for people are the report's and the command line's (issue #65): every other package
returns data, `flatscore.report` (and `flatscore.cli`) says it. This pins the rule on every
module outside those two: an f-string that builds a phrase (its literal text has a space) is
an error message (inside a `raise` or an `...Error(...)` call), text the model under test
reads (a domain's tasks and tool results, the agent's prompts, the chat format), or one of
the places listed below, each with why it is still there. A new sentence elsewhere fails
here: give it a code or a field and word it in `report/` (e.g. `report.notes_text`,
`report.warning_text`)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "flatscore"

WORDED_HERE = ("report", "cli")
"""The packages whose job is words for people."""

FOR_THE_MODEL = ("domains", "agents", "models/chat_format.py", "run/episode_loop.py")
"""Text the model under test reads, not a person: the built-in domains' task instructions,
scripted users and tool results; the agent's repair and oracle prompts; the chat template;
an exception the episode loop records as the turn's text."""

ALLOWED: dict[tuple[str, str], str] = {
    # Error messages built apart from their `raise` (returned to the code that raises).
    ("analysis/budget.py", "problem"): "a bad --budgets value's message (parse_ranges raises)",
    ("analysis/trials.py", "problem"): "a bad --trial-range value's message",
    ("analysis/settings.py", "_budget_text"): "a validator's error message",
    ("analysis/identity.py", "origin"): "where an episode was read, for the duplicate error",
    ("errors.py", "one_line"): "the one-line form of every InputError",
    ("formats/inspect_log.py", "_label"): "which sample a bad Inspect record is, for its error",
    ("formats/inspect_log.py", "_reader_error"): "an unreadable Inspect log's error",
    ("formats/inspect_log.py", "_validation_error"): "a bad Inspect field's error",
    ("formats/tau2.py", "_record_label"): "which simulation a bad τ² record is, for its error",
    ("store/inputs.py", "__init__"): "JSON nested too deep: the error's text",
    ("store/inputs.py", "json_error"): "invalid JSON: the error's text",
    ("store/jsonl.py", "parse_episode_line"): "which episode a bad line is, for its error",
    ("store/archive.py", "read_chunk"): "an archive chunk too large: the error's text",
    ("run/study.py", "load_study"): "where a study file's YAML is broken, for its error",
    ("study/schema.py", "_reachable"): "why an arm's option is refused, for the error",
    ("serve/guard.py", "_too_large"): "the HTTP 413 error's body",
    ("serve/app.py", "context_overflow"): "the HTTP 400 error's body, worded as OpenAI's",
    ("serve/app.py", "chat"): "the HTTP 400 error's body",
    ("run/time_limit.py", "_fire"): "the error line of a run that did not stop in time",
    # Machine text: code, wire formats and log files, not read as prose.
    ("models/servers.py", "server_version"): "Python code run to ask a server's version",
    ("models/servers.py", "log_header"): "a server log's header line ('=== flatscore' marks it)",
    # Labels, not sentences: recorded in the run files (the backend's `description`), the
    # family members of a correction, the settings' own rendering of the margin, the paired
    # test's fixed name.
    ("analysis/comparison.py", "correct_channels"): "'model / domain / arm: channel' members",
    ("analysis/settings.py", "margin_text"): "'±7.5 points', the margin as the settings hold it",
    ("analysis/paired_score.py", "<module>"): "TEST, the paired test's fixed name each "
    "comparison records as `test` (a constant beside DISCORDANT_MIN, the number it quotes)",
    ("models/adapter.py", "merge_named_adapter"): "the backend description run files record",
    ("models/adapter.py", "apply_shipped_adapter"): "the backend description run files record",
    ("models/compressed.py", "load_compressed"): "the backend description run files record",
    ("models/embedded.py", "load_model"): "the backend description run files record",
    ("models/gguf_files.py", "description"): "the backend description run files record",
    ("models/quant/evaluate.py", "fidelity"): "a row label of the fidelity table",
    ("study/schema.py", "report_title"): "the study's default title, 'flatscore · NAME'",
}


def _exempt(relative: str) -> bool:
    return relative.startswith(WORDED_HERE) or any(
        relative == place or relative.startswith(f"{place}/") for place in FOR_THE_MODEL
    )


def _phrases(source: str, relative: str) -> set[tuple[str, str]]:
    """(relative, function) of every phrase-building f-string in `source` (the module at
    `relative` under the package) that is not an error message."""
    tree = ast.parse(source)
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
            found.add((relative, func or "<module>"))
    return found


@functools.cache
def _found() -> frozenset[tuple[str, str]]:
    """Every module outside the report and the command line, parsed once for both tests."""
    modules = {p.relative_to(PACKAGE).as_posix(): p for p in sorted(PACKAGE.rglob("*.py"))}
    return frozenset().union(
        *(
            _phrases(path.read_text(encoding="utf-8"), relative)
            for relative, path in modules.items()
            if not _exempt(relative)
        )
    )


def test_no_module_outside_the_report_builds_sentences_but_the_listed_ones() -> None:
    found = _found()
    assert found <= set(ALLOWED), f"words built outside report/: {sorted(found - set(ALLOWED))}"


def test_the_list_names_only_places_that_still_build_words() -> None:
    """A place moved to the report leaves the list with it."""
    found = _found()
    assert set(ALLOWED) <= found, f"listed but gone: {sorted(set(ALLOWED) - found)}"


def test_a_sentence_outside_the_report_is_found() -> None:
    """The scan sees a warning built in a function, and not the same words raised; the
    model's own text is exempt by where it lives."""
    source = (
        "def warn(n):\n    return f'{n} episodes left out'\n"
        "def fail(n):\n    raise ValueError(f'{n} episodes left out')\n"
    )
    assert _phrases(source, "run/example.py") == {("run/example.py", "warn")}
    assert not _exempt("run/example.py") and _exempt("domains/retail/generate.py")
    assert _exempt("report/terminal.py") and not _exempt("models/chat_format_extra.py")
