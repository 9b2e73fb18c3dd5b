"""Clean output: no third-party warnings or progress bars in a command's output, no
wrapping at 80 columns when it is piped, and data printed literally (rich markup, emoji
codes and highlighting are off)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.table import Table

from flatscore.console import make_console, styled
from flatscore.report.terminal import verdict_lines

CLI = "from flatscore.cli import main; main()"


def _piped(
    *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real command with its output piped and no COLUMNS: what a log file gets."""
    base = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env = {**base, "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", CLI, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=cwd,
    )


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
        risk_screen=SimpleNamespace(verdict="[b]"),
    )  # fmt: skip
    (line,) = verdict_lines(SimpleNamespace(cells=[cell]))  # type: ignore[arg-type]
    assert printed(line).strip() == "[red]m / d[/]: inconclusive — [/]why  (risk screen: [b])"
