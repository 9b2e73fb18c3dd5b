"""Run `flatscore` as its console script does: `main()` in a fresh interpreter, output
captured as text. The one CLI runner of the suite; the environment is inherited, so a
worktree's `PYTHONPATH` makes its code the code under test."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

CLI = "import sys; from flatscore.cli import main; sys.argv[0] = 'flatscore'; main()"


def flatscore(
    *args: str | Path,
    env: dict[str, str | None] | None = None,
    cwd: Path | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """`flatscore ARGS...`: 200 columns, one torch thread; `env` adds variables to the
    inherited environment, or removes them (a value of None)."""
    merged: dict[str, str | None] = {
        **os.environ,
        "COLUMNS": "200",
        "OMP_NUM_THREADS": "1",
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-c", CLI, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={k: v for k, v in merged.items() if v is not None},
        cwd=cwd,
    )


@dataclass
class CliResult:
    """What `flatscore ARGS...` returned and printed (run in this process)."""

    returncode: int
    stdout: str
    stderr: str
