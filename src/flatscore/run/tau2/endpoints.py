"""Where τ²'s agent and user simulator send their requests: an OpenAI-compatible URL per arm,
or a `flatscore serve` process that flatscore starts for an in-process arm (`Tau2Servers`:
the driver starts them before the jobs that need them run).

`ServerPool` starts each distinct (kind, model, precision) once — torch (`local`) or
llama.cpp (`gguf`) — on a free loopback port, waits
until `/health` answers, and stops every server it started when it exits — normally, on an
exception or on Ctrl-C. Servers run in their own session (Ctrl-C reaches only flatscore,
which then stops them in order) and, on Linux, die with their parent even if it is killed
outright (`PR_SET_PDEATHSIG`), so no server outlives a run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from flatscore import defaults
from flatscore.errors import InputError
from flatscore.run.tau2.job import Tau2Endpoint, Tau2Recipe

if TYPE_CHECKING:
    from rich.console import Console

    from flatscore.run.jobs import EpisodeJob
    from flatscore.study import Tau2Spec


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """Linux: the kernel sends SIGTERM to this process when its parent dies (strictly: when
    the thread that started it ends; the runner starts servers from its main thread)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@dataclass
class ServedModel:
    """One `flatscore serve` child process (`kind`: `local` torch, or `gguf` llama.cpp)."""

    path: str
    quant: str
    threads: int
    kind: str = "local"
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    started_s: float = 0.0

    @property
    def name(self) -> str:
        base = f"{Path(self.path).name or self.path}@{self.quant}"
        return f"gguf:{base}" if self.kind == "gguf" else base

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, log_dir: Path) -> None:
        self.port = free_port()
        safe = self.name.replace("/", "_").replace(":", "-")
        self.log = log_dir / f"serve-{safe}-{self.port}.log"
        env = {**os.environ, "OMP_NUM_THREADS": str(self.threads)}
        cmd = [
            sys.executable,
            "-c",
            "from flatscore.cli import main; main()",
            "serve",
            "--kind",
            self.kind,
            "--model",
            self.path,
            "--arm",
            self.quant,
            "--port",
            str(self.port),
            "--threads",
            str(self.threads),
            "--name",
            self.name,
        ]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        self.started_s = time.monotonic()

    def weights(self) -> str | None:
        """What the server says plays the model (`/v1/models`), if it says."""
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, IndexError, TypeError):
            entry = httpx.get(f"{self.url}/models", timeout=10).json()["data"][0]
            weights = entry.get("flatscore", {}).get("weights")
            return weights if isinstance(weights, str) else None
        return None

    def wait_healthy(self, timeout_s: float) -> None:
        assert self.proc is not None
        health = f"http://127.0.0.1:{self.port}/health"
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                tail = self._log_tail()
                raise InputError(
                    f"flatscore serve for {self.name} exited ({self.proc.returncode}): {tail}"
                )
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(health, timeout=2).status_code == 200:
                    return
            if time.monotonic() > deadline:
                self.stop()
                raise InputError(
                    f"flatscore serve for {self.name} was not healthy after {timeout_s:.0f} s"
                )
            time.sleep(0.5)

    def _log_tail(self) -> str:
        if self.log is None or not self.log.exists():
            return "(no log)"
        lines = [ln for ln in self.log.read_text(errors="replace").splitlines() if ln.strip()]
        return lines[-1].strip() if lines else "(empty log)"

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


@dataclass
class ServerPool:
    """Starts `flatscore serve` once per (kind, model, precision) and stops all of them on
    exit."""

    log_dir: Path | None = None
    threads: int = 1
    start_timeout_s: float = defaults.TAU2_SERVE_START_TIMEOUT_S
    on_start: Callable[[str], None] | None = None
    servers: dict[tuple[str, str, str], ServedModel] = field(default_factory=dict)
    weights: dict[tuple[str, str, str], str | None] = field(default_factory=dict)

    def endpoint(self, path: str, quant: str, label: str, kind: str = "local") -> Tau2Endpoint:
        key = (kind, path, quant)
        server = self.servers.get(key)
        if server is None:
            log_dir = self.log_dir or Path(tempfile.gettempdir())
            log_dir.mkdir(parents=True, exist_ok=True)
            server = ServedModel(path=path, quant=quant, threads=self.threads, kind=kind)
            self.servers[key] = server
            if self.on_start is not None:
                self.on_start(f"starting flatscore serve for {server.name}")
            server.start(log_dir)
            server.wait_healthy(self.start_timeout_s)
            self.weights[key] = server.weights()
        return Tau2Endpoint(
            label=label, url=server.url, model=server.name, weights=self.weights[key]
        )

    def close(self) -> None:
        for server in self.servers.values():
            server.stop()

    def __enter__(self) -> ServerPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class Tau2Servers:
    """The driver's side of τ² jobs, around one run of a plan: `prepare` starts
    `flatscore serve` for the served models the jobs about to run need (none when nothing is
    left to run) and fills their URLs into the jobs, so the jobs can run in any process on
    this machine (local executor, or a Ray instance here; Ray workers on other machines
    reach only `openai` endpoints). On exit it stops every server it started and takes down
    this process's τ² log sink."""

    def __init__(self, spec: Tau2Spec, out_dir: Path, console: Console | None = None) -> None:
        on_start = None
        if console is not None:
            on_start = lambda msg: console.print(f"[dim]{msg}[/]", highlight=False)  # noqa: E731
        self.pool = ServerPool(
            log_dir=out_dir / "serve-logs",
            threads=spec.serve_threads,
            start_timeout_s=spec.serve_start_timeout_s,
            on_start=on_start,
        )

    def _resolve(self, endpoint: Tau2Endpoint) -> Tau2Endpoint:
        if not endpoint.served:
            return endpoint
        assert endpoint.serve_path is not None and endpoint.serve_quant is not None
        served = self.pool.endpoint(
            endpoint.serve_path, endpoint.serve_quant, endpoint.label, endpoint.serve_kind
        )
        return endpoint.model_copy(
            update={"url": served.url, "model": served.model, "weights": served.weights}
        )

    def prepare(self, jobs: list[EpisodeJob]) -> list[EpisodeJob]:
        out = []
        for job in jobs:
            if isinstance(job.recipe, Tau2Recipe):
                recipe = job.recipe.model_copy(
                    update={
                        "agent": self._resolve(job.recipe.agent),
                        "user": self._resolve(job.recipe.user),
                    }
                )
                job = job.model_copy(update={"recipe": recipe})
            out.append(job)
        return out

    def __enter__(self) -> Tau2Servers:
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.pool.close()
        finally:
            runner = sys.modules.get("flatscore.run.tau2.runner")
            if runner is not None:
                runner.log_to(None)
