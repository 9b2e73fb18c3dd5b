"""One reading of a study, everywhere: a sequential study run by `flatscore run` records its
analysis settings in every episode, and `analyze`, `report`, `gate` and `export model-card`
given only the run files read it as the study file says (sequentially, against its
reference, with its bootstrap) and show the same verdict for every comparison as the run's
own report; `--fixed-design` asks for the other reading."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from cli_runner import flatscore
from flatscore.analysis.recorded import RECORD_KEY
from flatscore.analysis.result import AnalysisResult
from flatscore.analysis.verdict_rule import GATE_OF
from flatscore.report.verdicts import (
    cell_verdict,
    lead_verdict,
    signed_ci_pts,
    signed_pts,
    verdict_text,
)
from flatscore.store.jsonl import read_episodes
from run_files import SEQUENTIAL_STUDY


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("one-reading")
    path = folder / "seq.yaml"
    path.write_text(SEQUENTIAL_STUDY, encoding="utf-8")
    done = flatscore("run", path, "--no-progress", timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return folder


def _result(path: Path) -> AnalysisResult:
    return AnalysisResult.model_validate_json(path.read_text(encoding="utf-8"))


def _leads(result: AnalysisResult) -> dict[str, str]:
    return {c.arm: lead_verdict(c)[0] for cell in result.cells for c in cell.comparisons}


def test_every_episode_records_its_study_settings(study: Path) -> None:
    for path in (study / "out" / "runs").glob("*.jsonl"):
        for ep in read_episodes(path):
            record = ep.metadata[RECORD_KEY]
            assert record["reference"] == "ref" and record["bootstrap"] == 100
            assert record["tost_margin"] == 7.5  # in points, as a study file writes it


def test_analyze_with_no_options_reads_the_study_as_its_file_says(study: Path) -> None:
    done = flatscore("analyze", study / "out" / "runs", "--json", "-")
    assert done.returncode == 0, done.stderr
    mine = AnalysisResult.model_validate_json(done.stdout)
    committed = _result(study / "out" / "analysis.json")
    assert mine.settings.sequential and mine.settings.reference == "ref"
    assert mine.settings.bootstrap == 100
    assert set(mine.settings.from_runs or []) >= {"reference", "bootstrap"}
    assert all(c.sequential is not None for cell in mine.cells for c in cell.comparisons)
    assert _leads(mine) == _leads(committed)
    seq = {c.arm: c.sequential for cell in committed.cells for c in cell.comparisons}
    for cell in mine.cells:
        for c in cell.comparisons:
            assert c.sequential is not None and seq[c.arm] is not None
            assert c.sequential.tasks == seq[c.arm].tasks  # the same stopping task


def test_fixed_design_asks_for_the_other_reading(study: Path) -> None:
    done = flatscore("analyze", study / "out" / "runs", "--fixed-design", "--json", "-")
    assert done.returncode == 0, done.stderr
    mine = json.loads(done.stdout)
    assert mine["settings"]["fixed_design"] is True and "sequential" not in mine["settings"]
    assert all(c.get("sequential") is None for cell in mine["cells"] for c in cell["comparisons"])
    both = flatscore("analyze", study / "out" / "runs", "--fixed-design", "--sequential")
    assert both.returncode == 2 and "--fixed-design" in both.stderr


def test_a_user_option_overrides_the_recorded_setting(study: Path) -> None:
    done = flatscore("analyze", study / "out" / "runs", "--bootstrap", "200", "--json", "-")
    assert done.returncode == 0, done.stderr
    settings: dict[str, Any] = json.loads(done.stdout)["settings"]
    assert settings["bootstrap"] == 200 and "bootstrap" not in settings["from_runs"]


def test_every_surface_shows_the_readings_verdict(study: Path, tmp_path: Path) -> None:
    runs = study / "out" / "runs"
    committed = _result(study / "out" / "analysis.json")
    wanted = {
        c.arm: (lead_verdict(c)[0], verdict_text(c))
        for cell in committed.cells
        for c in cell.comparisons
    }
    cell = committed.cells[0]
    # report: analysis.json, summary.md, report.html
    done = flatscore("report", runs, "--out", tmp_path / "report")
    assert done.returncode == 0, done.stderr
    rebuilt = _result(tmp_path / "report" / "analysis.json")
    assert {a: v for a, (v, _) in wanted.items()} == _leads(rebuilt)
    summary = (tmp_path / "report" / "summary.md").read_text(encoding="utf-8")
    assert f"## oracle · retail: **{cell_verdict(cell)}**" in summary
    for arm, (verdict, _) in wanted.items():
        assert f"**{arm} vs ref: {verdict}.**" in summary
    html = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    table = html[html.index("<th>verdict</th>") :]
    for arm, (_, shown) in wanted.items():
        row = re.search(rf"<td>{re.escape(arm)} vs ref</td>.*?</tr>", table, re.S)
        assert row is not None and f"<td>{shown}</td>" in row.group(0)
    # the terminal
    term = flatscore("analyze", runs)
    assert term.returncode == 0, term.stderr
    assert f"oracle / retail: {cell_verdict(cell)}" in term.stdout
    # the model card
    done = flatscore("export", "model-card", runs, "--out", tmp_path / "cards")
    assert done.returncode == 0, done.stderr
    for arm, (verdict, shown) in wanted.items():
        card = (tmp_path / "cards" / f"oracle__{arm}" / "README.md").read_text(encoding="utf-8")
        assert f"value: {verdict}" in card and f"**{shown}**" in card
    # the gate, arm by arm: sequential by default, the same verdict and stopping task
    seq = {c.arm: c.sequential for c in cell.comparisons}
    for arm, (verdict, _) in wanted.items():
        gate = flatscore("gate", runs / "oracle__ref.jsonl", runs / f"oracle__{arm}.jsonl")
        assert gate.returncode in (0, 3, 4), gate.stderr
        first = gate.stdout.splitlines()[0]
        assert len(first) <= 200 and first.startswith(GATE_OF[verdict].upper())  # type: ignore[index]
        decided = seq[arm]
        assert decided is not None and "sequential" in gate.stdout
        # its family is one comparison, the study's two: the output says so (once)
        assert gate.stdout.count("decided its 2 comparisons together") == 1
        assert "corrected over its own 1 comparison" in gate.stdout
        if f"after {decided.tasks} of" not in gate.stdout and decided.decided:
            assert "may stop at another task" in gate.stdout
        # the study's folder as both inputs: the study's family, its stopping task, no note
        whole = flatscore("gate", runs, runs, "--reference", "ref", "--candidate", arm,
                          "--json", "-")  # fmt: skip
        assert whole.returncode == json.loads(whole.stdout)["exit_code"], whole.stderr
        data = json.loads(whole.stdout)
        assert data["family"] == {"scope": "study", "comparisons": 2, "arms": ["same", "slips"]}
        assert data["cells"][0]["sequential"]["tasks"] == decided.tasks
        assert data["cells"][0]["analysis_verdict"] == verdict
        assert not any("together" in w for w in data["warnings"])


def test_the_gate_reads_the_recorded_settings_unless_given(study: Path) -> None:
    runs = study / "out" / "runs"
    pair = (runs / "oracle__ref.jsonl", runs / "oracle__slips.jsonl")
    done = flatscore("gate", *pair, "--json", "-")
    assert done.returncode in (0, 3, 4), done.stderr
    options = json.loads(done.stdout)["options"]
    assert options["bootstrap"] == 100 and "bootstrap" in options["from_runs"]
    fixed = ("--fixed-design", "--tight-budget", "1")  # this study's default K is 2
    given = flatscore("gate", *pair, "--bootstrap", "150", *fixed, "--json", "-")
    assert given.returncode in (0, 3, 4), given.stderr
    data = json.loads(given.stdout)
    assert data["options"]["bootstrap"] == 150
    assert all(not c["reason"].startswith("sequential") for c in data["cells"])


def test_the_gate_refuses_the_same_episodes_on_both_sides(study: Path) -> None:
    ref = study / "out" / "runs" / "oracle__ref.jsonl"
    done = flatscore("gate", ref, ref)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "the same episodes" in lines[0]


def test_every_gap_has_one_sign_on_every_surface(study: Path, tmp_path: Path) -> None:
    """Gap = reference − arm everywhere: analyze's JSON and terminal table, the model card
    and the gate, for the damaged arm (positive: it does worse)."""
    runs = study / "out" / "runs"
    committed = _result(study / "out" / "analysis.json")
    comp = next(c for cell in committed.cells for c in cell.comparisons if c.arm == "slips")
    g = comp.gap_default
    assert g.gap is not None and g.gap > 0  # the arm that fails most calls does worse
    shown = signed_pts(g.gap) + signed_ci_pts(g.ci_low, g.ci_high)
    assert shown.startswith("+") and "-0.0" not in shown
    term = flatscore("analyze", runs)
    assert term.returncode == 0 and shown in term.stdout
    done = flatscore("export", "model-card", runs, "--out", tmp_path / "cards")
    assert done.returncode == 0, done.stderr
    card = (tmp_path / "cards" / "oracle__slips" / "README.md").read_text(encoding="utf-8")
    assert f"| {shown} |" in card and "reference − arm" in card
    gate = flatscore(
        "gate", runs / "oracle__ref.jsonl", runs / "oracle__slips.jsonl", "--json", "-"
    )
    gap = json.loads(gate.stdout)["cells"][0]["budgets"][0]["gap"]
    assert gap == pytest.approx(g.gap)
    for text in (term.stdout, card, gate.stdout):
        assert "-0.0" not in text
