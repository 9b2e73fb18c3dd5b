"""Clean output: no third-party warnings or progress bars in a command's output, no
wrapping at 80 columns when it is piped, and data printed literally (rich markup, emoji
codes and highlighting are off)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table

from cli_runner import flatscore_process as flatscore
from flatscore.console import PlainProgress, make_console, progress, styled
from flatscore.report.terminal import verdict_lines


def _piped(
    *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real command with its output piped and no COLUMNS: what a log file gets."""
    return flatscore(*args, cwd=cwd, env={"COLUMNS": None, "LINES": None, **(env or {})})


def test_piped_lines_do_not_wrap_at_80_columns(tmp_path: Path) -> None:
    args = ("run", "--domain", "retail", "--task", "cancel_00", "--no-progress")
    done = _piped(*args, "--out", "episodes.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    [line] = done.stdout.splitlines()  # one line of more than 80 characters
    assert len(line) > 90 and line.startswith("episodes.jsonl: 1 episodes written")
    assert line.endswith("terminations {'user_stop': 1}")
    bad = _piped(
        "run", "--domain", "airline", "--study", "s" * 60, "--out", "x.jsonl", cwd=tmp_path
    )
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1


def test_the_command_consoles_do_not_wrap_when_piped() -> None:
    """Every command prints through these consoles (`flatscore margins`' "reference arm
    'ref'" line broke across two lines at 80 columns before)."""
    code = """
from flatscore.cli.app import console, err_console
console.print("flip rate by margin, reference arm 'ref' " + "int4 " * 30, highlight=False)
err_console.print("error: " + "x.jsonl, field 'arms' " * 8, highlight=False)
"""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert len(done.stdout.splitlines()) == 1 and "reference arm 'ref' int4" in done.stdout
    assert len(done.stderr.splitlines()) == 1


def test_piped_help_does_not_wrap_at_80_columns() -> None:
    """typer's --help has a console of its own; piped it broke every option's help
    mid-sentence at 80 columns (`flatscore run --help | less`)."""
    sentence = (
        "Run a study file, or (quick form) built-in domain tasks with one agent: a one-model"
        " study written to one JSONL file."
    )
    done = _piped("run", "--help")
    assert done.returncode == 0, done.stderr
    assert sentence in done.stdout
    assert max(len(line) for line in done.stdout.splitlines()) > 80
    narrow = _piped("run", "--help", env={"TERMINAL_WIDTH": "80"})  # typer's own setting wins
    assert sentence not in narrow.stdout
    assert max(len(line) for line in narrow.stdout.splitlines()) <= 80


def test_third_party_warnings_are_silenced_and_flatscore_warnings_are_not() -> None:
    code = """
import warnings, os
from flatscore.console import quiet_third_party
quiet_third_party()
warnings.warn_explicit("deprecated in v6", FutureWarning, "m.py", 1, module="transformers.x")
warnings.warn_explicit("peft says", UserWarning, "p.py", 1, module="peft.tuners")
warnings.warn_explicit("ours", UserWarning, "f.py", 1, module="flatscore.analysis")
print(os.environ["HF_HUB_DISABLE_PROGRESS_BARS"], os.environ["TRANSFORMERS_VERBOSITY"])
from tqdm.auto import tqdm  # a plain third-party bar, as transformers' GGUF loader has
for _ in tqdm(range(3), desc="third-party bar"):
    pass
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TQDM_")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.stdout.split() == ["1", "error"]
    assert "third-party bar" not in done.stderr
    assert "ours" in done.stderr
    assert "deprecated in v6" not in done.stderr and "peft says" not in done.stderr


@pytest.mark.slow
def test_a_model_command_prints_only_its_own_output(tmp_path: Path) -> None:
    """Loading the embedded model (transformers) leaks neither its FutureWarning about
    `is_gradient_checkpointing` nor its "Loading weights" bar into the command's output,
    nor, on the first load (an empty cache), its GGUF conversion bar."""
    done = _piped(
        "run", "--agent", "embedded", "--domain", "retail", "--task", "cancel_00",
        "--max-steps", "2", "--no-progress", "--out", tmp_path / "e.jsonl",
        env={"FLATSCORE_CACHE": str(tmp_path / "cache")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert len(done.stdout.splitlines()) == 1 and "episodes written" in done.stdout


def printed(*renderables: object) -> str:
    console = make_console()
    console.file = io.StringIO()
    for r in renderables:
        console.print(r)
    out = console.file.getvalue()
    assert isinstance(out, str)
    return out


def test_markup_looking_data_prints_as_is() -> None:
    for text in ["d[/].json", "results[run1].json", "[bold]x[/bold]", "[link=x]y", ":smile:"]:
        assert printed(text).strip() == text
        assert printed(styled(("error:", "bold red"), " ", text)).strip() == f"error: {text}"
    table = Table("arm", title="written to r[/].jsonl")
    table.add_row("[/]arm")
    out = printed(table)
    assert "[/]arm" in out and "r[/].jsonl" in out


def test_long_lines_are_not_wrapped() -> None:
    line = "x/" * 200
    assert printed(line).strip() == line


def test_verdict_lines_are_text_not_markup() -> None:
    from types import SimpleNamespace

    cell = SimpleNamespace(
        model="[red]m", domain="d[/]", verdict="inconclusive", verdict_reason="[/]why",
        risk_screen=SimpleNamespace(verdict="[b]"), comparisons=[],
    )  # fmt: skip
    result = SimpleNamespace(cells=[cell], sequential=None)
    (line,) = verdict_lines(result)  # type: ignore[arg-type]
    assert printed(line).strip() == "[red]m / d[/]: inconclusive — [/]why  (risk screen: [b])"


def test_a_piped_progress_prints_plain_lines_every_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not a terminal (a pipe, `| tee log`): rich would draw nothing until the end, so one
    plain line per bar is printed every FLATSCORE_PROGRESS_EVERY_S seconds and at the end."""
    monkeypatch.setenv("FLATSCORE_PROGRESS_EVERY_S", "0.05")
    console = make_console()
    console.file = io.StringIO()
    assert not console.is_terminal
    bar = progress(console, "ok {task.fields[ok]}")
    with bar:
        task = bar.add_task("retail[x]", total=4, ok=0)
        for done in range(1, 5):
            time.sleep(0.3)  # several intervals per step, like episodes minutes apart
            bar.update(task, advance=1, ok=done // 2)
        during = console.file.getvalue().splitlines()
    lines = console.file.getvalue().splitlines()
    assert len(during) >= 8  # ~6 intervals per step; a loaded machine may lose some
    assert all(
        re.fullmatch(r"retail\[x\] \d/4 ok \d elapsed \d:\d\d:\d\d eta \S+", ln) for ln in lines
    )
    assert lines[-1].startswith("retail[x] 4/4 ok 2 elapsed ")  # the final count, once more
    assert "━" not in console.file.getvalue()


def test_a_piped_progress_is_quiet_when_disabled_and_a_terminal_keeps_rich_bars() -> None:
    console = make_console()
    console.file = io.StringIO()
    with progress(console, "ok {task.fields[ok]}", enabled=False) as bar:
        bar.add_task("all cells", total=1, ok=0)
    assert console.file.getvalue() == ""
    terminal = Console(file=io.StringIO(), force_terminal=True)
    assert not isinstance(progress(terminal, "ok {task.fields[ok]}"), PlainProgress)


def test_a_piped_run_logs_its_progress(tmp_path: Path) -> None:
    """`flatscore run` with stderr piped: its progress arrives as plain lines."""
    done = _piped(
        "run", "--domain", "retail", "--task", "cancel_00", "--trials", "3",
        "--out", tmp_path / "e.jsonl", env={"FLATSCORE_PROGRESS_EVERY_S": "0.01"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines and all(" elapsed " in ln for ln in lines)
    assert any(ln.startswith("all cells 3/3 ok 3 ") for ln in lines)
