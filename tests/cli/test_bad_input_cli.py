"""Bad input a first-time user typed, through the real CLI: each is one line on stderr naming
the field as typed, exit 2, and nothing on stdout before it (the command checks what it can
before working)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from cli_runner import CliResult

ROOT = Path(__file__).parents[2]
OK = ROOT / "tests" / "fixtures" / "tau2" / "v1.0" / "ok.json"


def one_line(r: CliResult, *words: str) -> str:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == "", r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "Traceback" not in r.stderr and "Warning" not in r.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


POWER = ("power", "--success", "60", "--rates", "unknown_tool=0.1", "--tasks", "20")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("power", "--success", "60", "--rates", "foo=0.1", "--tasks", "20"), ("--rates", "foo")),
        (("power", "--success", "60", "--rates", "unknown_tool=0.1", "--tasks", "0"), ("--tasks",)),
        (
            ("power", "--success", "160", "--rates", "unknown_tool=0.1", "--tasks", "9"),
            ("--success",),
        ),
        (("power", "--success", "60", "--rates", "unknown_tool=1.5", "--tasks", "9"), ("--rates",)),
        (("gate", str(OK), str(OK), "--tight-budget", "-1"), ("--tight-budget",)),
        (("analyze", str(OK), "--json", "/missing/dir/a.json"), ("--json", "/missing/dir")),
        (("analyze", str(OK), "--tight-budget", "-3"), ("--tight-budget",)),
    ],
)
def test_flags_are_checked_first(
    flatscore: Callable[..., CliResult], args: tuple[str, ...], words: tuple[str, ...]
) -> None:
    one_line(flatscore(*args), *words)


def test_export_over_an_existing_file_is_bad_input(
    flatscore: Callable[..., CliResult], tmp_path: Path
) -> None:
    a_file = tmp_path / "tables"
    a_file.write_text("keep me")
    one_line(flatscore("export", "parquet", OK, "--out", a_file), "--out", "is a file")
    assert a_file.read_text() == "keep me"


def test_a_gzipped_tau2_file_says_gzip(flatscore: Callable[..., CliResult], tmp_path: Path) -> None:
    packed = tmp_path / "results.json.gz"
    packed.write_bytes(gzip.compress(OK.read_bytes()))
    out = tmp_path / "run.jsonl"
    one_line(flatscore("import", "tau2", packed, "--arm", "a", "--out", out), "gzip", "gunzip")
    one_line(flatscore("analyze", packed), "gzip")
    assert not out.exists()


def test_raw_tau2_files_of_two_models_ask_for_one_model(
    flatscore: Callable[..., CliResult], tmp_path: Path
) -> None:
    """A raw τ² file's arm is its model: two models are two one-arm cells, which used to be
    "nothing to compare" with exit 0 and no hint."""
    files = []
    for model in ("org/model-a", "org/model-b"):
        data = json.loads(OK.read_text())
        data["info"]["agent_info"]["llm"] = model
        path = tmp_path / f"{model.split('/')[1]}.json"
        path.write_text(json.dumps(data))
        files.append(path)
    line = one_line(flatscore("analyze", *files), "2 models", "--model", "import tau2")
    assert "model-a" in line and "model-b" in line
    one_line(flatscore("report", *files, "--out", tmp_path / "r"), "--model")
    assert not (tmp_path / "r").exists()


def test_an_old_spelling_warns_and_still_works(
    flatscore: Callable[..., CliResult], tmp_path: Path
) -> None:
    r = flatscore("power", "--success", "60", "--rates", "unknown_tool=0.1", "--tasks", "30",
                  "--K", "2", "--simulations", "20")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "--K is now --tight-budget" in r.stderr and "power at K=2" in r.stdout
