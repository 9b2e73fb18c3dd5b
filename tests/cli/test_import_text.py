"""flatscore.cli.import_text: the warnings `flatscore import` prints (known answers: the
lines the importers wrote before their findings became data)."""

from __future__ import annotations

from flatscore.cli.import_text import import_warnings
from flatscore.formats.tau2_import import FileImport, ImportSummary


def test_the_import_warnings_in_words() -> None:
    """Known answer: every warning an import prints, in order (the logs that did not
    finish, then Inspect's errors, then τ²'s crashes); a finished log and a τ² file none."""
    files = [
        FileImport(path="a.eval", format="eval", domain="d", tool_source="-", status="success"),
        FileImport(path="b.eval", format="eval", domain="d", tool_source="-", status="cancelled"),
        FileImport(path="c.json", format="v1", domain="d", tool_source="bundled"),
    ]
    summary = ImportSummary(
        out="run.jsonl",
        written=7,
        files=files,
        inspect_errors=2,
        crashes={"agent_error": 1, "unexpected_error": 3},
    )
    crashed = (
        ": τ² itself crashed (e.g. unparseable tool-call arguments); they count as failed "
        "episodes, with only the calls made before the crash (marked metadata.crashed)"
    )
    assert import_warnings(summary) == [
        "b.eval: the eval's status is 'cancelled': only the samples it finished are in the log",
        "2 of 7 samples raised an error in Inspect: they are kept as infrastructure_error "
        "episodes (excluded from rates), see metadata.inspect_error",
        "1 of 7 episodes ended in agent_error" + crashed,
        "3 of 7 episodes ended in unexpected_error" + crashed,
    ]
    assert import_warnings(ImportSummary(out="run.jsonl", written=3, files=files[:1])) == []
