"""`flatscore analyze` / `flatscore power` end to end through `flatscore.cli.main` (one run in
a subprocess like a user's, the rest in-process to keep the suite fast)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "analysis"))
from analysis_builders import episode

from flatscore.cli import main
from flatscore.store import EpisodeWriter


def subprocess_flatscore(*args: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from flatscore.cli import main; sys.argv[0] = 'flatscore'; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env={"COLUMNS": "120", "PATH": ""},
        timeout=120,
    )


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def flatscore(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Result]:
    def run(*args: str) -> Result:
        monkeypatch.setattr(sys, "argv", ["flatscore", *args])
        monkeypatch.setenv("COLUMNS", "120")
        capsys.readouterr()
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        out = capsys.readouterr()
        return Result(code, out.out, out.err)

    return run


@pytest.fixture(scope="module")
def run_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("runs") / "run.jsonl"
    with EpisodeWriter(path) as w:
        for t in range(12):
            w.write(
                episode(
                    "bf16", f"t{t}", calls=[("get_user", "ok"), ("foo", "fail")], success=t % 3 > 0
                )
            )
            w.write(
                episode(
                    "int4",
                    f"t{t}",
                    calls=[("foo", "fail"), ("toggle_airplane_mode", "fail"), ("get_user", "ok")],
                    success=t % 4 > 0,
                )
            )
    return path


def test_analyze_prints_verdicts_and_writes_json(run_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "analysis.json"
    res = subprocess_flatscore(
        "analyze", str(run_file), "--json", str(out), "--bootstrap", "300", "--budgets", "0-3"
    )
    assert res.returncode == 0, res.stderr
    first = res.stdout.splitlines()[0]
    assert first.startswith("m / retail:")
    assert "flat score" in first or "damage" in first
    assert "failure channels" in res.stdout and "S_ref(K) − S_arm(K)" in res.stdout
    data = json.loads(out.read_text())
    cell = data["cells"][0]
    assert {"model", "domain", "reference", "arms", "comparisons"} <= cell.keys()
    arm = cell["arms"][1]
    for key in (
        "arm",
        "episodes",
        "success_rate",
        "pass_k",
        "agent_tool_calls",
        "channels",
        "budget_curve",
        "recovery_rate",
    ):
        assert key in arm
    assert arm["channels"]["role_confusion"] == {"count": 12, "rate": pytest.approx(12 / 36)}
    assert arm["budget_curve"][0] == {
        "K": 0,
        "success_rate": 0.0,
        "ci_low": 0.0,
        "ci_high": 0.0,
        "recomputable": True,
    }
    comp = cell["comparisons"][0]
    for key in (
        "arm",
        "reference",
        "gap",
        "channel_amplification",
        "spearman_rho",
        "novel_fraction",
        "p_value",
        "p_holm",
        "tost_equivalent",
    ):
        assert key in comp
    assert set(comp["gap"][0]) >= {"K", "gap", "ci_low", "ci_high"}
    assert set(comp["channel_amplification"]["invented"]) >= {"ratio", "ci_low", "ci_high"}
    assert data["settings"]["tost_margin"] == 0.075 and data["definitions"]["budget_curve"]


def test_json_byte_identical(
    run_file: Path, tmp_path: Path, flatscore: Callable[..., Result]
) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for f in (a, b):
        assert (
            flatscore("analyze", str(run_file), "--json", str(f), "--bootstrap", "200").returncode
            == 0
        )
    assert a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--count", "some"], "--count"),
        (["--correction", "bonferroni"], "--correction"),
        (["--budgets", "3-1"], "--budgets"),
        (["--reference", "fp64"], "reference arm 'fp64'"),
        (["--tost-margin", "0"], "--tost-margin"),
        (["--channel-rules", "/nonexistent/rules.yaml"], "not found"),
        (["--json", "/nonexistent/dir/out.json"], "cannot write"),
    ],
)
def test_bad_options_one_line_exit_2(
    run_file: Path, args: list[str], message: str, flatscore: Callable[..., Result]
) -> None:
    res = flatscore("analyze", str(run_file), "--bootstrap", "200", *args)
    assert res.returncode == 2
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert "Traceback" not in res.stderr


def test_bad_run_file_one_line_exit_2(tmp_path: Path, flatscore: Callable[..., Result]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"episode_id": "x"}\n')
    res = flatscore("analyze", str(bad))
    assert res.returncode == 2 and str(bad) in res.stderr and "line 1" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    res = flatscore("analyze", str(tmp_path / "missing.jsonl"))
    assert res.returncode == 2 and "file not found" in res.stderr


def test_power_command(flatscore: Callable[..., Result]) -> None:
    res = flatscore("power", "--success", "0.6", "--rates", "unknown_tool=0.1,bad_arguments=0.02",
                    "--tasks", "114", "--K", "2", "--simulations", "100")  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "power at K=2" in res.stdout and "points" in res.stdout
    res = flatscore("power", "--success", "0.6", "--rates", "unknown_tool", "--tasks", "10")
    assert res.returncode == 2 and "--rates" in res.stderr
