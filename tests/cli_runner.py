"""Run `flatscore` as its console script does: `main()`, output captured as text. The one
CLI runner of the suite. By default in this process (the suite's workers have imported the
analysis stack once: a fresh interpreter pays 1-3 s of imports a call); with `isolated=True`,
`env` or `cwd`, in a fresh interpreter whose environment is inherited, so a worktree's
`PYTHONPATH` makes its code the code under test."""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

PIPE_COLUMNS = 200
CLI = "import sys; from flatscore.cli import main; sys.argv[0] = 'flatscore'; main()"


def flatscore(
    *args: str | Path,
    env: dict[str, str | None] | None = None,
    cwd: Path | None = None,
    timeout: float = 300,
    isolated: bool = False,
) -> subprocess.CompletedProcess[str]:
    """`flatscore ARGS...`: 200 columns, one torch thread; `env` adds variables to the
    inherited environment, or removes them (a value of None), in a process of its own, as
    does `isolated` (a test of what only a fresh interpreter shows: start-up imports,
    warnings filters, signals, a lock held by another process)."""
    if not isolated and env is None and cwd is None:
        return in_process(*args)
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


def in_process(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """`main()` with these arguments in this process, its output captured, its exit code as
    the process would have it (SystemExit's code, 0 when it returns)."""
    # by its module name: `flatscore.cli.app` as an attribute is the Typer object
    commands = importlib.import_module("flatscore.cli.app")
    from flatscore.cli import main

    # The command consoles were made when flatscore.cli was first imported in this process,
    # their width read from that moment's environment: as wide as a fresh piped process's.
    for console in (commands.console, commands.err_console):
        console.width = PIPE_COLUMNS
    out, err = io.StringIO(), io.StringIO()
    argv, columns = sys.argv, os.environ.get("COLUMNS")
    command = ["flatscore", *map(str, args)]
    sys.argv = command
    os.environ["COLUMNS"] = str(PIPE_COLUMNS)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if isinstance(exc.code, str):
                    err.write(exc.code + "\n")
    finally:
        sys.argv = argv
        if columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = columns
    return subprocess.CompletedProcess(command, code, out.getvalue(), err.getvalue())


def flatscore_process(
    *args: str | Path,
    env: dict[str, str | None] | None = None,
    cwd: Path | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """`flatscore ARGS...` always in a fresh interpreter (see `flatscore`'s `isolated`)."""
    return flatscore(*args, env=env, cwd=cwd, timeout=timeout, isolated=True)
