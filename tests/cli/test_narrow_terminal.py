"""`flatscore analyze` in an 80-column terminal: no table cell is cut ("int4-…"), no table
line is wider than the terminal (prose is left to the terminal to wrap); a table too wide
for it is shown one block per row instead."""

from __future__ import annotations

from pathlib import Path

from analysis_builders import episode
from cli_runner import flatscore_process as flatscore
from flatscore.store.jsonl import EpisodeWriter


def test_tables_are_readable_at_80_columns(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    with EpisodeWriter(path) as w:
        for arm in ("bf16-reference", "int4-awq-group32", "fp8-w8a8-visible"):
            for t in range(12):
                calls = [("get_user", "ok"), *([("get_usr", "fail")] * (t % 3 == 0))]
                w.write(episode(arm, f"t{t:02d}", 0, calls, success=t % 4 != 0))
    narrow = flatscore(
        "analyze", path, "--reference", "bf16-reference", "--bootstrap", "200",
        env={"COLUMNS": "80"},
    )  # fmt: skip
    assert narrow.returncode == 0, narrow.stderr
    tables = [line for line in narrow.stdout.splitlines() if line[:1] in " │┃┏┡└"]
    assert tables and max(len(line) for line in tables) <= 80
    assert "…" not in narrow.stdout
    for name in ("int4-awq-group32", "fp8-w8a8-visible", "entity_not_found", "recovery"):
        assert name in narrow.stdout
    wide = flatscore("analyze", path, "--reference", "bf16-reference", "--bootstrap", "200")
    assert "┃ arm" in wide.stdout  # at 200 columns the tables stay tables
