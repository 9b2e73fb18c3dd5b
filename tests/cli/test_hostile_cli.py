"""Issue 14 through the real CLI: markup-looking names print literally, concurrent writers
are refused, imports are atomic, and bad input is one line naming the file (exit 2)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from unittest.mock import patch

import pytest

from flatscore.cli import main
from flatscore.run.driver import plan_study
from flatscore.run.quick import QuickRun
from flatscore.store.jsonl import read_episodes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tau2"
OK = FIXTURES / "v1.0" / "ok.json"
CLI = [sys.executable, "-c", "from flatscore.cli import main; main()"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "80"}


def flatscore(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """`main()` (what the console script runs) in this process, exit code and output captured;
    any exception other than SystemExit propagates and fails the test (a traceback)."""
    out, err = io.StringIO(), io.StringIO()
    argv = ["flatscore", *map(str, args)]
    code = 0
    with redirect_stdout(out), redirect_stderr(err), patch.object(sys, "argv", argv):
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


def with_changes(tmp_path: Path, name: str, change: dict[str, object]) -> Path:
    data = json.loads(OK.read_text())
    for sim in data["simulations"]:
        sim.update(change)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("name", ["results[run1].json", "[bold]x[/bold].json"])
def test_markup_in_paths_prints_literally(tmp_path: Path, name: str) -> None:
    src = tmp_path / name
    src.parent.mkdir(exist_ok=True)  # "[bold]x[/bold].json": the file bold].json in "[bold]x["
    shutil.copy(OK, src)
    out = tmp_path / "runs[/]" / "r[1].jsonl"
    done = flatscore("import", "tau2", src, "--arm", "[/]", "--out", out)
    assert done.returncode == 0, done.stderr
    assert str(src) in done.stdout and str(out) in done.stdout
    assert [e.arm for e in read_episodes(out)] == ["[/]", "[/]"]
    shown = flatscore("analyze", out, "--bootstrap", "100")
    assert shown.returncode == 0, shown.stderr
    assert "[/]" in shown.stdout


def test_markup_in_a_bad_path_and_a_termination_reason(tmp_path: Path) -> None:
    line = one_error_line(flatscore("analyze", tmp_path / "d[" / "].json"))
    assert f"{tmp_path}/d[/].json" in line and "not found" in line
    bad = with_changes(tmp_path, "t.json", {"termination_reason": "[/]oops[bold]"})
    line = one_error_line(
        flatscore("import", "tau2", bad, "--arm", "a", "--out", tmp_path / "o.jsonl")
    )
    assert "'[/]oops[bold]'" in line and str(bad) in line


def test_markup_in_domain_and_model_names(tmp_path: Path) -> None:
    data = json.loads(OK.read_text())
    data["info"]["environment_info"]["domain_name"] = "dom[/]ain"
    data["info"]["agent_info"]["llm"] = "[red]model"
    src = tmp_path / "m.json"
    src.write_text(json.dumps(data))
    out = tmp_path / "o.jsonl"
    done = flatscore("import", "tau2", src, "--arm", "a", "--out", out)
    assert done.returncode == 0, done.stderr and "dom[/]ain" in done.stdout
    shown = flatscore("analyze", out, "--bootstrap", "100")
    assert shown.returncode == 0, shown.stderr
    assert "[red]model" in shown.stdout and "dom[/]ain" in shown.stdout


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"reward_info": {"reward": float("nan")}}, None),  # NaN/Infinity: not JSON at all
        ({"reward_info": {"reward": float("inf")}}, None),
        ({"reward_info": {"reward": 1e300}}, "reward_info.reward"),
        ({"reward_info": {"reward": 5.0}}, "reward_info.reward"),
        ({"reward_info": {"reward": -1.0}}, "reward_info.reward"),
        ({"trial": -1}, "trial"),
    ],
)
def test_out_of_range_tau2_values_are_refused(
    tmp_path: Path, change: dict[str, object], field: str | None
) -> None:
    bad = with_changes(tmp_path, "bad.json", change)
    line = one_error_line(
        flatscore("import", "tau2", bad, "--arm", "a", "--out", tmp_path / "o.jsonl")
    )
    assert str(bad) in line and "record #0" in line
    assert field is None or f"field '{field}'" in line


def test_special_files_and_empty_input_name_the_file(tmp_path: Path) -> None:
    d = tmp_path / "x.jsonl"
    d.mkdir()
    line = one_error_line(flatscore("analyze", d))  # a folder is read as a folder of runs
    assert str(d) in line and "no runs here" in line and "results.json" in line
    fifo = tmp_path / "f.json"
    os.mkfifo(fifo)
    assert "FIFO" in one_error_line(
        flatscore("import", "tau2", fifo, "--arm", "a", "--out", tmp_path / "o.jsonl")
    )
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    line = one_error_line(flatscore("analyze", empty))
    assert "no episodes in the input" in line and str(empty) in line
    huge = with_changes(tmp_path, "h.json", {})
    data = json.loads(huge.read_text())
    data["info"]["max_errors"] = 10**12
    huge.write_text(json.dumps(data))
    assert "info.max_errors" in one_error_line(flatscore("analyze", huge))


def test_import_is_atomic(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    assert (
        flatscore(
            "import", "tau2", FIXTURES / "v0.2" / "ok.json", "--arm", "a", "--out", out
        ).returncode
        == 0
    )
    before = out.read_bytes()
    truncated = tmp_path / "cut.json"
    truncated.write_bytes(OK.read_bytes()[: len(OK.read_bytes()) * 3 // 4])  # 2nd simulation cut
    one_error_line(flatscore("import", "tau2", OK, truncated, "--arm", "a", "--out", out))
    assert out.read_bytes() == before  # nothing from ok.json, nothing from the cut file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.json", "run.jsonl"]


RUN = [
    "run",
    "--domain",
    "retail",
    "--split",
    "test",
    "--trials",
    "1",
    "--concurrency",
    "1",
    "--no-progress",
]
PLANNED = len(
    plan_study(QuickRun.parse(domains=["retail"], split="test", trials=1).to_study()).jobs
)


@pytest.mark.slow  # a whole run in a second process; the lock's PID line: tests/store/test_jsonl.py
def test_a_second_run_on_the_same_file_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "R.jsonl"
    long = [*RUN[:-4], "3", *RUN[-3:]]  # --trials 3: still running when the second starts
    first = subprocess.Popen(
        [*CLI, *long, "--out", str(out)],
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not (out.exists() and out.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert first.poll() is None, "the first run finished before the second started"
        second = subprocess.run(
            [*CLI, *long, "--out", str(out), "--resume"],
            capture_output=True,
            text=True,
            timeout=300,
            env=ENV,
        )
        line = one_error_line(second)
        assert f"PID {first.pid}" in line and str(out) in line
    finally:
        assert first.wait(timeout=300) == 0
    ids = [e.episode_id for e in read_episodes(out)]
    assert len(ids) == len(set(ids)) == 3 * PLANNED


@pytest.mark.slow  # the lock itself is covered by the test above and by tests/store/test_jsonl.py
def test_two_runs_started_together_never_duplicate(tmp_path: Path) -> None:
    out = tmp_path / "R.jsonl"
    procs = [
        subprocess.Popen(
            [*CLI, *RUN, "--out", str(out), "--resume"],
            env=ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    results = [(p.wait(timeout=300), p.stderr.read() if p.stderr else "") for p in procs]
    assert sorted(code for code, _ in results) in ([0, 2], [0, 0])
    for code, err in results:
        if code == 2:
            assert "is being written by another flatscore process (PID" in err
    ids = [e.episode_id for e in read_episodes(out)]
    assert len(ids) == len(set(ids)) == PLANNED


def test_an_output_folder_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    """`report --out` under a plain file: the file system refuses; one line naming the path."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    done = flatscore("report", OK, "--out", blocker / "report")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and str(blocker / "report") in line
    assert "Not a directory" in line


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--budgets", "0-1000000000"], "--budgets"),  # would allocate a billion budgets
        (["--bootstrap", "5000000000"], "--bootstrap"),  # would never finish
    ],
)
def test_absurd_analysis_sizes_are_refused_at_once(
    tmp_path: Path, args: list[str], field: str
) -> None:
    line = one_error_line(flatscore("analyze", OK, *args))
    assert f"field '{field}'" in line


def test_report_keeps_one_copy_of_duplicates_when_asked(tmp_path: Path) -> None:
    copy = tmp_path / "copy.json"
    shutil.copy(OK, copy)
    refused = one_error_line(flatscore("report", OK, copy, "--out", tmp_path / "a"))
    assert "duplicate" in refused
    done = flatscore("report", OK, copy, "--out", tmp_path / "b", "--dedupe")
    assert done.returncode == 0, done.stderr
    analysis = json.loads((tmp_path / "b" / "analysis.json").read_text())
    assert any("duplicate" in w for w in analysis["warnings"])
