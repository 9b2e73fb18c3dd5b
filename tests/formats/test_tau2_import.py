"""`import_tau2`: τ² files appended to a run, idempotently, with a summary."""

from __future__ import annotations

import json
from pathlib import Path

from flatscore.formats.tau2_import import import_tau2
from flatscore.store.jsonl import read_episodes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tau2"


def test_summary_counts_and_idempotence(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    files = [FIXTURES / "v0.2" / "telecom.json", FIXTURES / "v1.0" / "steps.json"]
    first = import_tau2(files, out, arm="bf16")
    assert first.written == 3 and first.already_present == 0
    assert first.by_termination == {"max_steps": 2, "user_stop": 1}
    assert [(f.format, f.domain, f.tool_source, f.episodes) for f in first.files] == [
        ("tau2-v0", "telecom", "bundled", 1),
        ("tau2-v1", "mock", "bundled", 2),
    ]
    again = import_tau2(files, out, arm="bf16")
    assert (again.written, again.already_present) == (0, 3)
    other_arm = import_tau2(files, out, arm="int4")
    assert other_arm.written == 3
    assert len(list(read_episodes(out))) == 6


def test_skipped_simulations_are_listed(tmp_path: Path) -> None:
    data = json.loads((FIXTURES / "v1.0" / "ok.json").read_text())
    for sim in data["simulations"]:
        sim["termination_reason"] = "gave_up"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    summary = import_tau2([bad], tmp_path / "run.jsonl", arm="a", skip_invalid=True)
    assert summary.written == 0 and len(summary.skipped) == 2
    assert all("gave_up" in line for line in summary.skipped)
    assert summary.files[0].domain == "mock" and summary.files[0].episodes == 0
