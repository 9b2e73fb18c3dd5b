"""The repository's GitHub Action (action.yml) run locally: its gate step, as action.yml
writes it (the `run` line and the `env` that carries the inputs), with temporary
GITHUB_STEP_SUMMARY / GITHUB_OUTPUT files, on the embedded study's committed archive
(int4-awq: damage, its score visibly lower; fp8: pass)."""

from __future__ import annotations

import json
import lzma
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from flatscore.cli.github_action import has_sequential

ROOT = Path(__file__).resolve().parents[2]
ARCHIVE = ROOT / "studies" / "embedded-study" / "runs"
ACTION = yaml.safe_load((ROOT / "action.yml").read_text("utf-8"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The study's chunks, one run file per arm (114 tasks × 4 trials × 2 domains each)."""
    d = tmp_path_factory.mktemp("embedded-study")
    for arm in ("ref", "int4-awq", "fp8"):
        chunks = sorted(ARCHIVE.glob(f"smollm2-135m__{arm}.*.jsonl.xz"))
        (d / f"{arm}.jsonl").write_bytes(b"".join(lzma.decompress(c.read_bytes()) for c in chunks))
    return d


def _outputs(path: Path) -> dict[str, str]:
    """GITHUB_OUTPUT's `name=value` lines and `name<<MARK ... MARK` blocks."""
    out: dict[str, str] = {}
    lines = iter(path.read_text("utf-8").splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, mark = line.split("<<", 1)
            block = []
            for inner in lines:
                if inner == mark:
                    break
                block.append(inner)
            out[name] = "\n".join(block)
        else:
            name, _, value = line.partition("=")
            out[name] = value
    return out


def run_gate_step(tmp_path: Path, **given: str) -> tuple[int, str, dict[str, str], str]:
    """action.yml's gate step with these inputs (the others at their defaults): its exit
    code, the step summary, the outputs and its console output."""
    inputs = {name: str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
    inputs.update({k.replace("_", "-"): v for k, v in given.items()})
    missing = [n for n, s in ACTION["inputs"].items() if s.get("required") and not inputs[n]]
    assert not missing, missing
    step = next(s for s in ACTION["runs"]["steps"] if s.get("id") == "gate")

    def resolve(value: Any) -> str:
        return re.sub(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}", lambda m: inputs[m[1]], str(value))

    summary, output = tmp_path / "summary.md", tmp_path / "output.txt"
    summary.write_text("", "utf-8")
    output.write_text("", "utf-8")
    env = {
        **os.environ,
        **{k: resolve(v) for k, v in step["env"].items()},
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_OUTPUT": str(output),
        "COLUMNS": "200",
        # setup-python's python first on PATH, as in the action: this interpreter here
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    done = subprocess.run(
        ["bash", "-e", "-c", step["run"]],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done.returncode, summary.read_text("utf-8"), _outputs(output), done.stdout + done.stderr


def test_every_output_is_one_the_step_writes() -> None:
    for name, spec in ACTION["outputs"].items():
        assert spec["value"] == f"${{{{ steps.gate.outputs.{name} }}}}", name
    assert ACTION["runs"]["using"] == "composite"


@pytest.mark.slow  # the damage path runs fast in the test below
def test_int4_awq_is_visible_damage(runs: Path, tmp_path: Path) -> None:
    code, summary, outputs, log = run_gate_step(
        tmp_path, reference=str(runs / "ref.jsonl"), candidate=str(runs / "int4-*.jsonl")
    )
    assert code == 3, log
    assert outputs["verdict"] == "damage" and outputs["exit-code"] == "3"
    assert summary.startswith("## flatscore gate: DAMAGE (exit 3)")
    for domain in ("retail", "telecom"):
        line = next(li for li in summary.splitlines() if f"| {domain} | int4-awq vs ref |" in li)
        assert "| **damage** | visible damage |" in line and " drop |" in line
    decided = json.loads(outputs["decided"])
    assert {(d["domain"], d["verdict"]) for d in decided} == {
        ("retail", "damage"),
        ("telecom", "damage"),
    }
    assert json.loads(Path(outputs["json"]).read_text("utf-8"))["verdict"] == "damage"
    assert outputs["summary"].startswith("DAMAGE:")


def test_damage_fails_the_step_even_when_inconclusive_may_pass(runs: Path, tmp_path: Path) -> None:
    """`fail-on-inconclusive: false` lets only an inconclusive verdict through."""
    code, _, outputs, log = run_gate_step(
        tmp_path,
        reference=str(runs / "ref.jsonl"),
        candidate=str(runs / "int4-awq.jsonl"),
        fail_on_inconclusive="false",
    )
    assert outputs["verdict"] == "damage"
    assert code == 3, log


@pytest.mark.slow  # the gate's pass path runs fast in tests/analysis/test_gate.py
def test_fp8_passes_and_a_glob_of_several_files_is_one_input(runs: Path, tmp_path: Path) -> None:
    """Negative control: fp8 passes in both domains; the candidate glob matches two files
    (fp8's and, as a second file, int4-awq's), so the candidate arm is named — and the gate
    reads them as the study's runs they are (both arms against ref, as `report` would).
    The step passes today's option names (no deprecation warning in its log)."""
    code, summary, outputs, log = run_gate_step(
        tmp_path,
        reference=str(runs / "ref.jsonl"),
        candidate=f"{runs}/fp8.jsonl {runs}/int4-awq.jsonl",
        candidate_arm="fp8",
    )
    assert code == 0, log
    assert outputs["verdict"] == "pass" and outputs["exit-code"] == "0"
    assert summary.count("| **pass** |") == 2 and "≈" in summary
    assert len(json.loads(outputs["decided"])) == 2
    family = json.loads(Path(outputs["json"]).read_text("utf-8"))["family"]
    assert family == {"scope": "study", "comparisons": 4, "arms": ["fp8", "int4-awq"]}
    assert "--candidate fp8" in log and "warning" not in log


def test_bad_input_is_an_error_line_exit_2(tmp_path: Path) -> None:
    code, summary, outputs, log = run_gate_step(
        tmp_path, reference=str(tmp_path / "nothing-*.jsonl"), candidate=str(tmp_path)
    )
    assert code == 2 and "::error::input reference:" in log and "matches no file" in log
    assert outputs["verdict"] == "error" and "ERROR" in summary


@pytest.mark.slow  # two gate steps on a sequential study (7 s); tests/cli/test_one_reading.py
def test_sequential_is_passed_on_or_refused_clearly(runs: Path, tmp_path: Path) -> None:
    """`flatscore gate --sequential` is gated on being there: without it, one clear line."""
    code, _, outputs, log = run_gate_step(
        tmp_path,
        reference=str(runs / "ref.jsonl"),
        candidate=str(runs / "fp8.jsonl"),
        sequential="true",
    )
    if has_sequential():
        assert code in (0, 3, 4) and "--sequential" in log, log
    else:
        assert code == 2 and "has no --sequential yet" in log
        assert outputs["verdict"] == "error"
