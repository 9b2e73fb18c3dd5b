"""kill -9 of a real `flatscore run` mid-run, then `--resume`: nothing lost or duplicated."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flatscore.run.driver import plan_study
from flatscore.run.quick import QuickRun
from flatscore.store.jsonl import read_episodes

ARGS = [
    "run",
    "--domain",
    "all",
    "--split",
    "test",
    "--trials",
    "3",
    "--concurrency",
    "1",
    "--no-progress",
]
CLI = "from flatscore.cli import main; main()"


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


@pytest.mark.slow  # a killed run resumed end to end; fast: test_driver.py's resume after a kill
def test_kill_then_resume(tmp_path: Path) -> None:
    out = tmp_path / "run.jsonl"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, *ARGS, "--out", str(out)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while _lines(out) < 20 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    before = [e.episode_id for e in read_episodes(out)]  # readable, maybe with a partial tail
    study = QuickRun.parse(domains=["all"], split="test", trials=3).to_study()
    planned = {j.episode_id for j in plan_study(study).jobs}
    assert 20 <= len(before) < len(planned)

    done = subprocess.run(
        [sys.executable, "-c", CLI, *ARGS, "--out", str(out), "--resume"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    after = [e.episode_id for e in read_episodes(out)]
    assert after[: len(before)] == before  # nothing finished was lost or rewritten
    assert len(after) == len(set(after)) == len(planned)
    assert set(after) == planned
    assert out.read_bytes().endswith(b"\n")
