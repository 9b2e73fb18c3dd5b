"""`flatscore import inspect` / `flatscore export inspect` through `flatscore.cli.main`: a real
Inspect log in and out, and damaged logs ending in one line and exit code 2 (one run in a
subprocess like a user's, the rest in-process to keep the suite fast)."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from cli_runner import CliResult

pytest.importorskip("inspect_ai", reason="the `inspect` extra is not installed")

from flatscore.store.jsonl import read_episodes

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "inspect"
EVAL_LOG = FIXTURES / "orders.eval"
JSON_LOG = FIXTURES / "orders.json"


def test_import_and_export_in_a_subprocess(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    code = "from flatscore.cli import main; main()"
    res = subprocess.run(
        [sys.executable, "-c", code, "import", "inspect", str(EVAL_LOG), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"COLUMNS": "200", "PATH": "", **_pythonpath()},
    )
    assert res.returncode == 0, res.stderr
    assert "6 episodes, format inspect-eval, domain orders, tool lists from tool_defs" in res.stdout
    assert len(list(read_episodes(out))) == 6


def _pythonpath() -> dict[str, str]:
    import os

    return {"PYTHONPATH": os.environ.get("PYTHONPATH", "")}


def test_import_options_and_export(tmp_path: Path, flatscore: Callable[..., CliResult]) -> None:
    run = tmp_path / "run.jsonl"
    res = flatscore(
        "import", "inspect", JSON_LOG, "--out", run, "--arm", "int4", "--model", "m",
        "--domain", "retail", "--study", "s",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    eps = list(read_episodes(run))
    assert {(e.arm, e.model, e.domain, e.study) for e in eps} == {("int4", "m", "retail", "s")}
    again = flatscore("import", "inspect", EVAL_LOG, "--out", run, "--arm", "int4", "--model",
                      "m", "--domain", "retail", "--study", "s")  # fmt: skip
    assert again.returncode == 0 and "6 episodes were already in" in again.stdout
    res = flatscore("export", "inspect", run, "--out", tmp_path / "logs")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "logs" / "retail__int4.eval").is_file()
    assert "6 episodes (int4, retail)" in res.stdout


def _edit_json(tmp_path: Path, name: str, edit: Callable[[dict], None]) -> Path:
    data = json.loads(JSON_LOG.read_text("utf-8"))
    edit(data)
    path = tmp_path / name
    path.write_text(json.dumps(data), "utf-8")
    return path


def _set(path: list[str | int], value: object) -> Callable[[dict], None]:
    def edit(data: dict) -> None:
        node = data
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return edit


def _truncated(tmp_path: Path, src: Path, size: int) -> Path:
    path = tmp_path / f"cut{src.suffix}"
    path.write_bytes(src.read_bytes()[:size])
    return path


def _wrong_type_eval(tmp_path: Path) -> Path:
    """The .eval log with one tool call's name a number (Inspect's own zip, one member edited)."""
    path = tmp_path / "types.eval"
    with zipfile.ZipFile(EVAL_LOG) as zin, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == "samples/cancel-A2_epoch_1.json":
                sample = json.loads(data)
                sample["messages"][1]["tool_calls"][0]["function"] = 7
                data = json.dumps(sample).encode()
            z.writestr(info.filename, data)
    return path


BAD: dict[str, tuple[Callable[[Path], Path], str]] = {
    "truncated-eval": (
        lambda t: _truncated(t, EVAL_LOG, 20_000),
        "cut.eval: not an Inspect .eval log (damaged or not a zip archive",
    ),
    "truncated-json": (
        lambda t: _truncated(t, JSON_LOG, 100_000),
        "cut.json, record #1: invalid or truncated JSON",
    ),
    "epoch-a-string": (
        lambda t: _edit_json(t, "e.json", _set(["samples", 1, "epoch"], "two")),
        "e.json, record #1 (id cancel-A2, epoch two), field 'epoch': Input should be a valid "
        "integer",
    ),
    "score-a-dict": (
        lambda t: _edit_json(
            t, "s.json", _set(["samples", 2, "scores", "cancelled", "value"], {"a": 1})
        ),
        "s.json, record #2 (id cancel-A3, epoch 1), field 'scores.cancelled.value': the success "
        "score must be",
    ),
    "score-out-of-range": (
        lambda t: _edit_json(t, "r.json", _set(["samples", 0, "scores", "cancelled", "value"], 3)),
        "field 'scores.cancelled.value'",
    ),
    "call-name-a-number": (
        _wrong_type_eval,
        "types.eval, record #2 (id cancel-A2, epoch 1), field 'messages[1].tool_calls[0]."
        "function': Input should be a valid string",
    ),
    "deep": (
        lambda t: _edit_json(
            t, "d.json", _set(["samples", 0, "store"], json.loads("[" * 150 + "]" * 150))
        ),
        "d.json: JSON nested deeper than 100 levels",
    ),
    "samples-not-a-list": (
        lambda t: _edit_json(t, "n.json", _set(["samples"], 5)),
        "n.json, field 'samples': must be a list",
    ),
    "unknown-role": (
        lambda t: _edit_json(t, "o.json", _set(["samples", 0, "messages", 1, "role"], "robot")),
        "field 'messages[1].role': must be one of 'system', 'user', 'assistant', 'tool', "
        "not 'robot'",
    ),
    "header-model-a-number": (
        lambda t: _edit_json(t, "h.json", _set(["eval", "model"], 5)),
        "h.json, field 'eval.model': Input should be a valid string",
    ),
    "empty": (
        lambda t: (t / "empty.json").write_text("") or t / "empty.json",
        "empty.json: not a readable Inspect log",
    ),
    "not-a-log": (
        lambda t: (t / "notes.txt").write_text("hi") and t / "notes.txt",  # type: ignore[func-returns-value]
        "notes.txt: not an Inspect log (expected a .eval or .json file)",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_log_is_one_line_and_exit_2(
    tmp_path: Path, flatscore: Callable[..., CliResult], case: str
) -> None:
    make, expected = BAD[case]
    log = make(tmp_path)
    out = tmp_path / "run.jsonl"
    res = flatscore("import", "inspect", log, "--out", out)
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert expected in lines[0]
    assert "Traceback" not in res.stderr
    assert not out.exists() or out.read_text() == ""


def test_bad_error_map_is_one_line(tmp_path: Path, flatscore: Callable[..., CliResult]) -> None:
    bad = tmp_path / "map.yaml"
    bad.write_text("version: 1\ntool_errors: {parsing: typo}\ntermination: {error: x}\n")
    res = flatscore("import", "inspect", EVAL_LOG, "--out", tmp_path / "r.jsonl",
                    "--error-map", bad)  # fmt: skip
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1 and "map.yaml" in res.stderr and "typo" in res.stderr
