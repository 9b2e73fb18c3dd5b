"""`flatscore analyze` / `flatscore power` end to end through `flatscore.cli.main` (one run in
a subprocess like a user's, the rest in-process to keep the suite fast)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from analysis_builders import episode
from cli_runner import CliResult
from cli_runner import flatscore as run_flatscore
from flatscore.store.jsonl import EpisodeWriter


def subprocess_flatscore(*args: str) -> subprocess.CompletedProcess[str]:
    return run_flatscore(*args, env={"COLUMNS": "120", "PATH": ""}, timeout=120)


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
    assert "inconclusive" in first and "points" in first  # 12 tasks: too few to tell
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
    # S(0) = 0 on 12 tasks: the Wilson interval reaches z²/(n + z²), not [0, 0]
    assert arm["budget_curve"][0] == {
        "K": 0,
        "success_rate": 0.0,
        "ci_low": 0.0,
        "ci_high": pytest.approx(1.959964**2 / (12 + 1.959964**2)),
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
    run_file: Path, tmp_path: Path, flatscore: Callable[..., CliResult]
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
        (["--json", "/nonexistent/dir/out.json"], "--json"),
    ],
)
def test_bad_options_one_line_exit_2(
    run_file: Path, args: list[str], message: str, flatscore: Callable[..., CliResult]
) -> None:
    res = flatscore("analyze", str(run_file), "--bootstrap", "200", *args)
    assert res.returncode == 2
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert "Traceback" not in res.stderr


def test_bad_run_file_one_line_exit_2(tmp_path: Path, flatscore: Callable[..., CliResult]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"episode_id": "x"}\n')
    res = flatscore("analyze", str(bad))
    assert res.returncode == 2 and str(bad) in res.stderr and "line 1" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    res = flatscore("analyze", str(tmp_path / "missing.jsonl"))
    assert res.returncode == 2 and "file not found" in res.stderr


def test_undecidable_reference_asks_for_it(
    tmp_path: Path, flatscore: Callable[..., CliResult]
) -> None:
    """Two models with digits but no format in their names: no guess, one line, exit 2."""
    path = tmp_path / "two.jsonl"
    with EpisodeWriter(path) as w:
        for arm in ("claude-3-7-sonnet", "gpt-4.1"):
            w.write(episode(arm, "t0"))
    res = flatscore("analyze", str(path), "--bootstrap", "200")
    assert res.returncode == 2 and "--reference" in res.stderr
    assert "cannot tell the reference" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert flatscore("analyze", str(path), "--reference", "gpt-4.1").returncode == 0


def test_the_same_file_twice_is_a_duplicate(
    run_file: Path, tmp_path: Path, flatscore: Callable[..., CliResult]
) -> None:
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(run_file.read_bytes())
    res = flatscore("analyze", str(run_file), str(copy), "--bootstrap", "200")
    assert res.returncode == 2 and "duplicate episode" in res.stderr
    assert str(run_file) in res.stderr and str(copy) in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    out = tmp_path / "a.json"
    res = flatscore("analyze", str(run_file), str(copy), "--dedupe", "--json", str(out))
    assert res.returncode == 0 and "--dedupe: 24 duplicate episode(s) left out" in res.stdout
    assert json.loads(out.read_text())["episodes_read"] == 24


def test_inferred_tau2_errors_are_counted(
    tmp_path: Path, flatscore: Callable[..., CliResult]
) -> None:
    """A τ² file without `error` flags: failures from the `Error:` text, and a warning."""
    src = Path(__file__).parents[1] / "fixtures" / "tau2" / "v1.0" / "ok.json"
    data = json.loads(src.read_text())
    for sim in data["simulations"]:
        for m in sim["messages"]:
            m.pop("error", None)
    path = tmp_path / "noflag.json"
    path.write_text(json.dumps(data))
    out = tmp_path / "a.json"
    res = flatscore("analyze", str(path), "--json", str(out), "--bootstrap", "200")
    assert res.returncode == 0, res.stderr
    result = json.loads(out.read_text())
    assert result["cells"][0]["arms"][0]["failed_agent_calls"] > 0
    assert any("counted as failed because their text starts with 'Error:'" in w
               for w in result["warnings"])  # fmt: skip


def test_human_output_has_no_question_marks_or_na_percent(
    run_file: Path, flatscore: Callable[..., CliResult]
) -> None:
    res = flatscore("analyze", str(run_file), "--bootstrap", "200")
    assert res.returncode == 0
    assert "?" not in res.stdout and "n/a%" not in res.stdout
    assert "new: 0 → " in res.stdout  # role confusion: never in the reference
    assert "task-weighted" in res.stdout


def test_power_command(flatscore: Callable[..., CliResult]) -> None:
    res = flatscore("power", "--success", "0.6", "--rates", "unknown_tool=0.1,bad_arguments=0.02",
                    "--tasks", "114", "--K", "2", "--simulations", "100")  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "power at K=2" in res.stdout and "points" in res.stdout
    res = flatscore("power", "--success", "0.6", "--rates", "unknown_tool", "--tasks", "10")
    assert res.returncode == 2 and "--rates" in res.stderr


def test_balanced_keeps_what_every_arm_has(
    run_file: Path, tmp_path: Path, flatscore: Callable[..., CliResult]
) -> None:
    """A third arm, int8, ran tasks t0-t4 only: with --balanced every arm is analysed on those
    5 tasks (15 episodes), and a warning counts the 14 left out; without it, all 29."""
    extra = tmp_path / "int8.jsonl"
    with EpisodeWriter(extra) as w:
        w.write_all(episode("int8", f"t{t}", calls=[("get_user", "ok")]) for t in range(5))
    out = tmp_path / "balanced.json"
    res = flatscore(
        "analyze", str(run_file), str(extra), "--balanced", "--json", str(out), "--bootstrap", "200"
    )
    assert res.returncode == 0, res.stderr
    assert "--balanced: 14 of 29 episodes left out" in res.stdout
    data = json.loads(out.read_text())
    assert data["episodes_read"] == 15
    assert {a["arm"]: a["episodes"] for a in data["cells"][0]["arms"]} == {
        "bf16": 5,
        "int8": 5,
        "int4": 5,
    }
    assert data["settings"]["balanced"] is True  # recorded: a rebuild reproduces it
    report = tmp_path / "report"
    again = flatscore(
        "report", str(run_file), str(extra), "--settings-from", str(out), "--out", str(report)
    )
    assert again.returncode == 0, again.stderr
    rebuilt = json.loads((report / "analysis.json").read_text())
    assert rebuilt["episodes_read"] == 15 and rebuilt["settings"] == data["settings"]
    whole = flatscore(
        "analyze", str(run_file), str(extra), "--json", str(out), "--bootstrap", "200"
    )
    assert whole.returncode == 0 and json.loads(out.read_text())["episodes_read"] == 29
    assert "balanced" not in json.loads(out.read_text())["settings"]  # off: as before


def test_a_tau2_file_with_no_error_limit(tmp_path: Path) -> None:
    """τ² writes `max_errors: 0` for "no limit": no budget, so the default K is the episodes'
    own largest failed-call count (stated), never max_errors − 1 = −1, and every S(K) is
    recomputable (before: a pydantic traceback, exit 1)."""
    fixture = Path(__file__).parents[1] / "fixtures" / "tau2" / "v1.0" / "ok.json"
    data = json.loads(fixture.read_text("utf-8"))
    data["info"]["max_errors"] = 0
    path = tmp_path / "unlimited.json"
    path.write_text(json.dumps(data), "utf-8")
    out = tmp_path / "analysis.json"
    done = run_flatscore("analyze", str(path), "--json", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text("utf-8"))
    k = result["settings"]["default_K"]
    arms = result["cells"][0]["arms"]
    assert k == max(a["max_failed_calls"] for a in arms) >= 1
    assert "max_errors = 0 (τ²: no limit)" in result["settings"]["default_K_source"]
    assert result["settings"]["budgets"] == list(range(k + 1))
    assert all(p["recomputable"] for a in arms for p in a["budget_curve"])
    assert all(a["recorded_max_errors"] is None for a in arms)


def test_trials_pin_the_analysis_and_bad_values_are_one_line(
    run_file: Path, tmp_path: Path
) -> None:
    """`--trial-range 1` (counted from 1: the episodes' trial 0) is recorded in the settings and
    left out of them without it; no episode of the named trials, or trials not counted from
    1, is one line naming the flag and exit 2."""
    out = tmp_path / "a.json"
    done = run_flatscore("analyze", str(run_file), "--trial-range", "1", "--json", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(out.read_text("utf-8"))["settings"]["trials"] == [1]
    done = run_flatscore("analyze", str(run_file), "--json", str(out))
    assert "trials" not in json.loads(out.read_text("utf-8"))["settings"]
    for value, message in (("2", "no episode of trials 2"), ("0", "counted from 1")):
        done = run_flatscore("analyze", str(run_file), "--trial-range", value)
        assert done.returncode == 2 and message in done.stderr and "--trial-range" in done.stderr
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_the_old_trials_spelling_still_reads_a_range_with_a_warning(
    run_file: Path, tmp_path: Path
) -> None:
    """`--trials` is a count where a command runs episodes; as a range it was renamed
    `--trial-range` and the old spelling still works, with one warning line."""
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    done = run_flatscore("analyze", str(run_file), "--trials", "1", "--json", str(old))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "--trials is now --trial-range" in done.stderr
    run_flatscore("analyze", str(run_file), "--trial-range", "1", "--json", str(new))
    assert json.loads(old.read_text("utf-8")) == json.loads(new.read_text("utf-8"))
