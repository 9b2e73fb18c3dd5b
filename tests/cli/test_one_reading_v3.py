"""Study v3's committed runs read the same way on every surface, given nothing but the paths:
`analyze`, `report`, `export model-card`, `gate` (the study's folder as both inputs, naming
the two arms: the archive's runs predate recorded study settings) and the GitHub Action's
step give each comparison the verdict of the committed report's headline (`lead_verdict` of
studies/embedded-study-v3/analysis.json), and the comparisons table and cell headlines agree
with them. Slow (a study of 2,400 episodes read five ways); its fast twin is
tests/cli/test_one_reading.py's every-surface test on a small sequential run."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_github_action import run_gate_step

from cli_runner import flatscore
from flatscore.analysis.result import AnalysisResult
from flatscore.analysis.verdict_rule import GATE_OF
from flatscore.report.verdicts import cell_verdict, lead_verdict, verdict_text
from flatscore.store import archive

pytestmark = pytest.mark.slow

STUDY_V3 = Path(__file__).resolve().parents[2] / "studies" / "embedded-study-v3"
MODEL = "gemma3-270m"


@pytest.fixture(scope="module")
def v3(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, AnalysisResult]:
    runs = tmp_path_factory.mktemp("v3") / "runs"
    archive.unpack(STUDY_V3 / "runs", runs)
    committed = AnalysisResult.model_validate_json(
        (STUDY_V3 / "analysis.json").read_text(encoding="utf-8")
    )
    return runs, committed


def _headlines(result: AnalysisResult) -> dict[tuple[str, str], str]:
    return {
        (cell.domain, c.arm): str(lead_verdict(c)[0])
        for cell in result.cells
        for c in cell.comparisons
    }


def test_every_surface_reads_study_v3_as_its_committed_report(
    v3: tuple[Path, AnalysisResult], tmp_path: Path
) -> None:
    runs, committed = v3
    wanted = _headlines(committed)
    assert len(wanted) == 12
    # analyze and report with the paths alone: the run's own reading (sequential, recorded)
    done = flatscore("analyze", runs, "--json", tmp_path / "analysis.json")
    assert done.returncode == 0, done.stderr
    analysed = AnalysisResult.model_validate_json((tmp_path / "analysis.json").read_text("utf-8"))
    assert _headlines(analysed) == wanted
    for cell in committed.cells:
        assert f"{MODEL} / {cell.domain}: {cell_verdict(cell)}" in done.stdout
    done = flatscore("report", runs, "--out", tmp_path / "report")
    assert done.returncode == 0, done.stderr
    summary = (tmp_path / "report" / "summary.md").read_text(encoding="utf-8")
    html = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    for cell in committed.cells:
        assert f"## {MODEL} · {cell.domain}: **{cell_verdict(cell)}**" in summary
        for c in cell.comparisons:
            assert f"**{c.arm} vs {c.reference}: {wanted[(cell.domain, c.arm)]}.**" in summary
    table = html[html.index("<th>verdict</th>") :]
    for cell in committed.cells:
        for c in cell.comparisons:
            rows = re.findall(rf"<td>{re.escape(c.arm)} vs ref</td>.*?</tr>", table, re.S)
            assert any(f"<td>{verdict_text(c)}</td>" in row for row in rows), c.arm
    # the model cards
    done = flatscore("export", "model-card", runs, "--out", tmp_path / "cards")
    assert done.returncode == 0, done.stderr
    for cell in committed.cells:
        for c in cell.comparisons:
            card = (tmp_path / "cards" / f"{MODEL}__{c.arm}" / "README.md").read_text("utf-8")
            assert f"value: {wanted[(cell.domain, c.arm)]}" in card, (cell.domain, c.arm)
    # the gate on the study's folder, and the Action's step, for an arm decided early and
    # the arm whose sequential reading is open where the run stopped it
    for arm in ("int4", "int8"):
        done = flatscore(
            "gate", runs, runs, "--reference", "ref", "--candidate", arm, "--json", "-"
        )
        data = json.loads(done.stdout)
        assert data["family"]["scope"] == "study", done.stderr
        for gated in data["cells"]:
            assert gated["verdict"] == GATE_OF[wanted[(gated["domain"], arm)]]  # type: ignore[index]
        (tmp_path / arm).mkdir()
        code, step_summary, outputs, log = run_gate_step(
            tmp_path / arm,
            reference=str(runs),
            candidate=str(runs),
            reference_arm="ref",
            candidate_arm=arm,
        )
        assert code == data["exit_code"], log
        assert outputs["verdict"] == data["verdict"]
        for domain in ("retail", "telecom"):
            line = next(li for li in step_summary.splitlines() if f"| {domain} | {arm} vs" in li)
            assert f"| {wanted[(domain, arm)]} |" in line, line
