"""`python -m tools.regenerate`: it names a stale file without writing it, then rewrites it to
what the code generates; the repository's own files are up to date."""

from __future__ import annotations

from pathlib import Path

import pytest

from flatscore.analysis.schema import schema_text
from tools.regenerate import main, regenerate


def test_a_stale_schema_is_named_by_check_and_rewritten_by_a_run(tmp_path: Path) -> None:
    stale = tmp_path / "docs" / "analysis.schema.json"
    stale.parent.mkdir()
    stale.write_text("{}\n", encoding="utf-8")
    assert regenerate(["schema"], root=tmp_path, check=True) == [stale]
    assert stale.read_text(encoding="utf-8") == "{}\n"  # --check writes nothing
    assert regenerate(["schema"], root=tmp_path) == [stale]
    assert stale.read_text(encoding="utf-8") == schema_text()
    assert regenerate(["schema"], root=tmp_path, check=True) == []


def test_the_committed_schema_is_up_to_date(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--check", "schema"]) == 0
    assert capsys.readouterr().out == "up to date\n"


def test_an_unknown_target_exits_2_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--check", "bogus"])
    assert exit_.value.code == 2
    assert "unknown target 'bogus'" in capsys.readouterr().err
