"""`flatscore report` end to end, as a user runs it: logs in, report out, bad input → one line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cli_runner import flatscore as run_flatscore
from flatscore.episode import Episode
from flatscore.store.jsonl import EpisodeWriter


def flatscore(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_flatscore(*args, env={"PATH": "/usr/bin:/bin"})  # no browser, no extras


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory, study_episodes: list[Episode]) -> Path:
    run = tmp_path_factory.mktemp("run")
    for domain in ("retail", "telecom"):
        with EpisodeWriter(run / "episodes" / f"{domain}.jsonl") as writer:
            writer.write_all(e for e in study_episodes if e.domain == domain)
    return run


def test_report_rebuilds_from_logs_and_matches_analyze(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    done = flatscore("report", run_dir, "--out", out, "--bootstrap", "300", "--seed", "3")
    assert done.returncode == 0, done.stderr
    assert "inconclusive" in done.stdout  # 6 tasks: too few to show amplification
    assert f"report: {out / 'report.html'}" in done.stdout
    assert {p.name for p in out.iterdir()} == {
        "report.html",
        "summary.md",
        "analysis.json",
        "tables.md",
    }

    json_path = tmp_path / "analysis.json"
    runs = sorted((run_dir / "episodes").glob("*.jsonl"))
    done = flatscore("analyze", *runs, "--json", json_path, "--bootstrap", "300", "--seed", "3")
    assert done.returncode == 0, done.stderr
    assert json_path.read_bytes() == (out / "analysis.json").read_bytes()

    again = tmp_path / "again"
    done = flatscore("report", run_dir, "--out", again, "--settings-from", out / "analysis.json")
    assert done.returncode == 0, done.stderr
    for name in ("report.html", "summary.md", "analysis.json"):
        assert (again / name).read_bytes() == (out / name).read_bytes(), name


def test_bad_input_is_one_line_and_exit_code_2(run_dir: Path, tmp_path: Path) -> None:
    missing = flatscore("report", tmp_path / "nope", "--out", tmp_path / "o")
    assert missing.returncode == 2
    assert "nope" in missing.stderr and "Traceback" not in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1

    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"episode_id": "x"}\n', "utf-8")
    bad = flatscore("report", broken, "--out", tmp_path / "o")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "broken.jsonl" in bad.stderr and "line 1" in bad.stderr

    not_analysis = tmp_path / "x.json"
    not_analysis.write_text("[1, 2]", "utf-8")
    bad = flatscore("report", run_dir, "--out", tmp_path / "o", "--settings-from", not_analysis)
    assert bad.returncode == 2 and "not an analysis.json" in bad.stderr


@pytest.mark.slow  # a whole report (3 s); the margins section: tests/report/test_margins_figures.py
def test_report_attaches_a_margins_result(run_dir: Path, tmp_path: Path) -> None:
    from test_margins_figures import margins

    path = tmp_path / "margins.json"
    path.write_text(margins().model_dump_json())
    out = tmp_path / "report"
    done = flatscore("report", run_dir, "--out", out, "--bootstrap", "200", "--margins", path)
    assert done.returncode == 0, done.stderr
    assert 'id="margins"' in (out / "report.html").read_text()
    assert '"transcripts_arm": "bf16"' in (out / "analysis.json").read_text()
    broken = tmp_path / "broken.json"
    broken.write_text("{}")
    bad = flatscore("report", run_dir, "--out", out, "--margins", broken)
    assert bad.returncode == 2 and "broken.json" in bad.stderr and "Traceback" not in bad.stderr
