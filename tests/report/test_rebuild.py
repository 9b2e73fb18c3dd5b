"""`settings_from_file`: each way an analysis.json can be wrong is one line naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from flatscore.errors import InputError
from flatscore.report.rebuild import settings_from_file


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("{", ": not valid JSON (Expecting property name enclosed in double quotes)"),
        ("[1, 2]", ": no 'settings' object: not an analysis.json"),
        ('{"cells": []}', ": no 'settings' object: not an analysis.json"),
        (
            '{"settings": {"budgets": "x"}}',
            ", field 'settings.budgets': bad budget list 'x': expected e.g. 0-10 or 0,2,9",
        ),
    ],
)
def test_a_bad_analysis_json_is_one_line_naming_it(tmp_path: Path, text: str, line: str) -> None:
    path = tmp_path / "analysis.json"
    path.write_text(text, "utf-8")
    with pytest.raises(InputError) as info:
        settings_from_file(path)
    assert info.value.one_line() == f"{path}{line}"
    assert info.value.__suppress_context__  # no traceback behind the line
