"""Seconds per test file of the fast suite, for tests/conftest.py's `LONGEST_FIRST`.

Runs `pytest -m "not slow"` once, serially, in a subprocess with this module as a pytest
plugin: each test's CPU time (its process, threads included, and the subprocesses it waited
for) and wall time. Per file, the larger of the two is its cost (a browser test waits on
Chromium, a server test on its threads). Prints the files at or above `--threshold`, longest
first, with the suite's totals; `LONGEST_FIRST` should be that list. CPU seconds hold up on
a busy host better than wall seconds, so the order can be measured beside other work.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from benchmarks.harness import ROOT, Table

OUT_ENV = "FLATSCORE_SUITE_SECONDS"
_measured: list[tuple[str, float, float]] = []


def _cpu_seconds() -> float:
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Generator[None, None, None]:
    cpu, wall = _cpu_seconds(), time.monotonic()
    yield
    _measured.append((item.nodeid, _cpu_seconds() - cpu, time.monotonic() - wall))


def pytest_sessionfinish(session: pytest.Session) -> None:
    if out := os.environ.get(OUT_ENV):
        Path(out).write_text(json.dumps(_measured), "utf-8")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--threshold", type=float, default=15.0, help="seconds per file (15)")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")


def run(args: argparse.Namespace) -> list[Table]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "seconds.json"
        command = [sys.executable, "-m", "pytest", "-m", "not slow", "-q", "-p", __name__]
        done = subprocess.run(
            [*command, "-p", "no:cacheprovider", *args.pytest_args],
            cwd=ROOT,
            env={**os.environ, OUT_ENV: str(out)},
            check=False,
        )
        if done.returncode != 0 or not out.exists():
            raise SystemExit(f"the suite did not pass (exit {done.returncode}): no timings")
        measured = json.loads(out.read_text("utf-8"))
    files: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0.0])
    for nodeid, cpu, wall in measured:
        row = files[nodeid.split("::")[0]]
        row[0], row[1], row[2] = row[0] + cpu, row[1] + wall, row[2] + 1
    ranked = sorted(files.items(), key=lambda f: -max(f[1][0], f[1][1]))
    rows: list[list[object]] = [
        [f"`{name}`", f"{cpu:.1f}", f"{wall:.1f}", int(tests)]
        for name, (cpu, wall, tests) in ranked
        if max(cpu, wall) >= args.threshold
    ]
    total_cpu = sum(c for _, c, _ in measured)
    total_wall = sum(w for _, _, w in measured)
    note = (
        f"{len(measured)} tests in {len(files)} files: {total_cpu:.0f} CPU-s, "
        f"{total_wall:.0f} s wall, serially; {len(rows)} files of ≥ {args.threshold:g} s."
    )
    return [Table(["file", "CPU s", "wall s", "tests"], rows, "r", notes=[note])]
