"""`flatscore repair-effect` on real runs: a table, a JSON file, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from flatscore.cli import app
from flatscore.runner.quick import QuickRun, run_quick


def test_repair_effect_command(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    for arm in ("bf16", "int4"):
        for repair in (False, True):
            quick = QuickRun.parse(
                domains=["retail"], arm=arm, repair=repair, task_ids=["cancel_00", "return_00"]
            )
            run_quick(quick, path, resume=True, progress=False)
    out = tmp_path / "repair.json"
    result = CliRunner().invoke(
        app, ["repair-effect", str(path), "--json", str(out), "--bootstrap", "200"]
    )
    assert result.exit_code == 0, result.output
    assert "| oracle | retail | int4 |" in result.output
    data = json.loads(out.read_text())
    [cell] = data["cells"]
    assert [a["arm"] for a in cell["arms"]] == ["bf16", "int4"]
    assert all(a["effect"]["value"] == 0 for a in cell["arms"])  # the oracle never fails


def test_repair_effect_command_errors(tmp_path: Path) -> None:
    missing = CliRunner().invoke(app, ["repair-effect", str(tmp_path / "nope.jsonl")])
    assert missing.exit_code != 0
    path = tmp_path / "plain.jsonl"
    quick = QuickRun.parse(domains=["retail"], arm="bf16", task_ids=["cancel_00"])
    run_quick(quick, path, progress=False)
    result = CliRunner().invoke(app, ["repair-effect", str(path)])
    assert result.exit_code != 0
    assert isinstance(result.exception, Exception)
    assert "no arm was run both with and without repair" in str(result.exception)
