"""A study whose arms are GGUF files served by llama.cpp's own OpenAI-compatible server
(`python -m llama_cpp.server`), started and stopped by flatscore from the study file
(`server:` arms), through the real `flatscore run` command: it runs end to end and records
which server played each arm; no server process outlives the run — after a normal end, a
Ctrl-C, or a time limit; and a server that cannot start (a bad path, a port taken, a file
that is no model) ends the run with one line naming the arm and the log's last lines, exit
2, and no episode written.

Slow tier (`make test-servers`): each test starts llama.cpp servers (seconds each on 2 cores)
and the end-to-end one runs grammar-constrained episodes. Skipped, with the reason, where
llama-cpp-python or its server packages are not installed."""

from __future__ import annotations

import importlib.metadata
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from flatscore.store.jsonl import read_episodes
from server_processes import NEEDS_LLAMA_CPP_SERVER

pytestmark = [pytest.mark.slow, *NEEDS_LLAMA_CPP_SERVER]

SRC = str(Path(__file__).resolve().parents[2] / "src")


def write_study(tmp_path: Path, arms: dict[str, Any], **study: Any) -> Path:
    """A study of one endpoint model whose arms are llama.cpp servers flatscore starts."""
    data = {
        "name": "served",
        "output": "out",
        "models": [
            {
                "name": "smollm2",
                "kind": "openai",
                "server": {"kind": "llama-cpp", "max_model_len": 4096},
                "arms": arms,
                "max_retries": 0,
                "timeout_s": 300,
                "sampling": {"temperature": 0, "max_tokens": 32},
            }
        ],
        "domains": ["retail"],
        "tasks_per_domain": 1,
        "trials": 1,
        "max_steps": 4,
        "concurrency": 1,
        **study,
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))  # arms in the order given
    return path


def flatscore_run(study: Path, *extra: str) -> subprocess.Popen[str]:
    """`flatscore run STUDY` as a person runs it, in its own process."""
    env = {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "flatscore.cli", "run", str(study), "--no-progress", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def started_ports(out: Path) -> list[int]:
    """The ports of every server flatscore started for the study (its logs' header lines)."""
    ports = []
    for log in sorted((out / "server-logs").glob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("=== flatscore"):
                ports.append(int(re.search(r"--port (\d+)", line).group(1)))  # type: ignore[union-attr]
    return ports


def server_pids(ports: list[int]) -> list[int]:
    """Live llama.cpp server processes listening on any of `ports` (by command line)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if b"llama_cpp.server" not in argv or state == "Z":
            continue
        if any(str(p).encode() in argv for p in ports):
            pids.append(int(entry.name))
    return pids


def no_server_left(ports: list[int], within_s: float = 20.0) -> bool:
    deadline = time.monotonic() + within_s
    while server_pids(ports):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def episodes_written(out: Path) -> int:
    return sum(1 for p in (out / "runs").glob("*.jsonl") for _ in read_episodes(p))


def wait_until_ready(out: Path, count: int, timeout_s: float = 300) -> list[int]:
    """The ports of `count` started servers, once the last of them answers."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ports = started_ports(out) if (out / "server-logs").is_dir() else []
        if len(ports) >= count:
            try:
                if httpx.get(f"http://127.0.0.1:{ports[-1]}/v1/models", timeout=2).is_success:
                    return ports
            except httpx.HTTPError:
                pass
        time.sleep(0.5)
    raise AssertionError(f"{count} servers not ready in {timeout_s} s")


ARMS: dict[str, Any] = {
    "ref": {"server": {"model": "embedded-base"}},  # the shipped Q4_1 file as it is
    "q4_0": {"server": {"model": "embedded-base", "quant": "Q4_0"}},  # made by llama.cpp
}


def test_a_study_of_llama_cpp_server_arms_runs_end_to_end(tmp_path: Path) -> None:
    from flatscore.models.gguf_files import reference_file

    study = write_study(tmp_path, ARMS)
    run = flatscore_run(study, "--no-report")
    _, stderr = run.communicate(timeout=900)
    assert run.returncode == 0, stderr[-3000:]
    out = tmp_path / "out"
    episodes = {ep.arm: ep for p in (out / "runs").glob("*.jsonl") for ep in read_episodes(p)}
    assert sorted(episodes) == ["q4_0", "ref"]
    version = importlib.metadata.version("llama_cpp_python")
    for arm, ep in episodes.items():
        assert not ep.is_infrastructure_error, ep.metadata.get("error")
        assert ep.serving is not None and ep.serving.server == "llama-cpp"
        assert ep.serving.server_version == version
        command = ep.serving.server_command or []
        assert command[1:3] == ["-m", "llama_cpp.server"]
        served = command[command.index("--model") + 1]
        if arm == "ref":  # the shipped file as it is
            assert served == str(reference_file("embedded-base"))
        else:  # made from it by llama.cpp's quantizer
            assert served.endswith(".Q4_0.gguf")
        assert command[command.index("--chat_format") + 1] == "chatml-function-calling"
        turns = [m for m in ep.messages if m.role == "assistant" and m.usage is not None]
        assert turns and all(m.usage.completion_tokens > 0 for m in turns if m.usage)
    # the same flags for both arms: the commands differ in the file and the port only
    a, b = (list(episodes[arm].serving.server_command or []) for arm in ("ref", "q4_0"))  # type: ignore[union-attr]
    differ = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    assert [a[i - 1] for i in differ] == ["--model", "--port"]
    ports = started_ports(out)
    assert len(ports) == 2 and no_server_left(ports)
    assert sorted(p.name for p in (out / "server-logs").iterdir()) == [
        "smollm2_q4_0.log",
        "smollm2_ref.log",
    ]


def test_ctrl_c_stops_every_server(tmp_path: Path) -> None:
    study = write_study(tmp_path, ARMS, tasks_per_domain=20)
    run = flatscore_run(study, "--no-report")
    try:
        ports = wait_until_ready(tmp_path / "out", 2)
        assert len(server_pids(ports)) == 2
        run.send_signal(signal.SIGINT)
        _, stderr = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, stderr[-2000:]
    assert no_server_left(ports)


def test_a_time_limit_stops_every_server(tmp_path: Path) -> None:
    study = write_study(tmp_path, ARMS, tasks_per_domain=20)
    run = flatscore_run(study, "--no-report", "--time-limit", "45s")
    stdout, stderr = run.communicate(timeout=300)
    assert run.returncode == 0, stderr[-2000:]
    assert "time limit 45s reached" in stdout + stderr
    ports = started_ports(tmp_path / "out")
    assert ports and no_server_left(ports)


def start_fails(tmp_path: Path, arms: dict[str, Any]) -> tuple[str, list[int]]:
    """Run a study whose last arm's server cannot start: its one error line, and the ports
    of the servers it started."""
    run = flatscore_run(write_study(tmp_path, arms), "--no-report")
    _, stderr = run.communicate(timeout=600)
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert run.returncode == 2, stderr[-2000:]
    # one line says what went wrong, last; before it only the notes of servers starting
    assert lines and lines[-1].startswith("error: "), stderr
    assert all(ln.startswith("starting the llama-cpp server for ") for ln in lines[:-1]), stderr
    out = tmp_path / "out"
    assert not (out / "runs").exists() or episodes_written(out) == 0
    return lines[-1], started_ports(out)


def test_a_bad_model_path_is_one_line_naming_the_arm(tmp_path: Path) -> None:
    arms = {**ARMS, "bad": {"server": {"model": str(tmp_path / "nowhere.gguf")}}}
    line, ports = start_fails(tmp_path, {"ref": ARMS["ref"], "bad": arms["bad"]})
    assert re.match(r"error: server for arm smollm2/bad exited with code \d+ \(log ", line)
    assert "nowhere.gguf" in line.split("): ", 1)[1]  # the log's last lines say why
    assert len(ports) == 2 and no_server_left(ports)  # the first arm's server stopped too


def test_a_port_taken_while_the_server_loads_is_one_line_naming_the_arm(
    tmp_path: Path,
) -> None:
    """The port flatscore picked is taken by another process before llama.cpp binds it
    (the squatter binds as soon as the log names the port; the model takes seconds to
    load): llama.cpp's server exits, and the run ends in one line with its log's last lines."""
    out = tmp_path / "out"
    squatter = socket.socket()
    taken = threading.Event()

    def squat() -> None:
        deadline = time.monotonic() + 120
        while not taken.is_set() and time.monotonic() < deadline:
            ports = started_ports(out) if (out / "server-logs").is_dir() else []
            if ports:
                squatter.bind(("127.0.0.1", ports[0]))
                squatter.listen()
                taken.set()
            time.sleep(0.01)

    thread = threading.Thread(target=squat, daemon=True)
    thread.start()
    try:
        line, ports = start_fails(tmp_path, {"ref": ARMS["ref"]})
    finally:
        thread.join(timeout=5)
        squatter.close()
    assert taken.is_set()
    assert re.match(r"error: server for arm smollm2/ref exited with code \d+ \(log ", line)
    assert "address already in use" in line.lower()
    assert len(ports) == 1 and no_server_left(ports)


def test_a_file_that_is_no_model_is_one_line_naming_the_arm(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + os.urandom(4096))  # the magic, then nothing llama.cpp reads
    line, ports = start_fails(tmp_path, {"broken": {"server": {"model": str(broken)}}})
    assert line.startswith("error: server for arm smollm2/broken exited with code")
    assert len(ports) == 1 and no_server_left(ports)
