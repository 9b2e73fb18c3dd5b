"""Servers flatscore starts itself: one process per arm, on a free loopback port, stopped
whatever way the run ends. The one mechanism for a study's `server:` arms (llama.cpp's and
vLLM's OpenAI-compatible servers) and for the `flatscore serve` children of τ²'s live runner.

`command_line` builds each kind's command from a `ServerSpec` (the same flags for every arm
of a model: context length, seed, chat format or template, tool-call parser, logprobs).
`ServerProcess` starts one, appends its output to its log (beside the run), waits until it
lists its models, and stops it (its whole process group). A server runs in its own session
(Ctrl-C reaches only flatscore, which then stops it) and, on Linux, dies with its parent even
if that is killed outright (`PR_SET_PDEATHSIG`). `ServerPool` starts each distinct server
once and stops them all when it exits (normally, on an error, on Ctrl-C or at a time limit).
A server that does not come up is one `ServerStartError`: the arm, what happened, and the
last lines of its log.
"""

from __future__ import annotations

import contextlib
import datetime
import importlib.metadata
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from flatscore.errors import InputError
from flatscore.study.server import NAMED_MODELS, ServedBy, ServerSpec

HOST = "127.0.0.1"
LLAMA_CPP_CHAT_FORMAT = "chatml-function-calling"
"""llama.cpp's chat format with OpenAI-style tool calls (grammar-constrained)."""
VLLM_TOOL_CALL_PARSER = "hermes"
"""vLLM's parser for `<tool_call>{...}</tool_call>` (Qwen, Hermes, SmolLM2-style templates)."""
TAIL_LINES = 3
STOP_WAIT_S = 15.0

_PACKAGE = {"llama-cpp": "llama_cpp_python", "vllm": "vllm", "flatscore": "flatscore"}
"""The distribution whose version a kind's server reports."""


class ServerStartError(InputError):
    """A server that did not come up: the CLI prints the one line and exits 2."""


def free_port() -> int:
    """A loopback port nobody listens on now."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def port_free(port: int) -> bool:
    """Whether nothing listens on loopback `port` now (another server would answer in its
    place)."""
    with socket.socket() as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


SPELLINGS = {
    "llama-cpp": ("llama_cpp.server", "--model_alias", "--n_ctx"),
    "vllm": ("vllm.entrypoints.openai.api_server", "--served-model-name", "--max-model-len"),
}
"""The OpenAI-compatible servers flatscore starts as they are: the module, and how each
spells the model name requests use and the context length."""


def command_line(spec: ServerSpec, port: int, served_name: str) -> list[str]:
    """The command that serves `spec` on loopback `port` under the model name
    `served_name` (what requests name), with the kind's shared flags, then `spec.args`."""
    python = spec.python or sys.executable
    if spec.kind == "flatscore":
        cmd = [
            python, "-c", "from flatscore.cli import main; main()", "serve",
            "--kind", spec.engine or "local",
            "--model", str(spec.model),
            "--arm", spec.quant or "ref",
            "--port", str(port),
            "--threads", str(spec.threads),
            "--name", served_name,
        ]  # fmt: skip
        return [*cmd, *spec.args]
    if spec.kind not in SPELLINGS:
        raise ValueError(f"unknown server kind {spec.kind!r}")
    module, name, length = SPELLINGS[spec.kind]
    weights = spec.model if spec.kind == "llama-cpp" else spec.checkpoint
    cmd = [
        python, "-m", module, "--model", str(weights), name, served_name,
        "--host", HOST, "--port", str(port), length, str(spec.max_model_len),
    ]  # fmt: skip
    if spec.kind == "llama-cpp":
        cmd += [
            "--n_threads", str(spec.threads), "--n_threads_batch", str(spec.threads),
            "--seed", str(spec.seed),
            "--chat_format", spec.chat_format or LLAMA_CPP_CHAT_FORMAT,
        ]  # fmt: skip
    else:
        cmd += [
            "--seed", str(spec.seed),
            "--max-logprobs", str(spec.max_logprobs),
            "--generation-config", "vllm",
            "--enable-auto-tool-choice",
            "--tool-call-parser", spec.tool_call_parser or VLLM_TOOL_CALL_PARSER,
        ]  # fmt: skip
        if spec.chat_template is not None:
            cmd += ["--chat-template", spec.chat_template]
        if spec.gpu_memory_utilization is not None:
            cmd += ["--gpu-memory-utilization", str(spec.gpu_memory_utilization)]
    return [*cmd, *spec.args]


def server_version(spec: ServerSpec) -> str | None:
    """The version of the package that serves `spec` in the interpreter that runs it."""
    package = _PACKAGE.get(spec.kind or "")
    if package is None:
        return None
    python = spec.python or sys.executable
    if python == sys.executable:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            return importlib.metadata.version(package)
        return None
    code = f"import importlib.metadata as m; print(m.version({package!r}))"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        done = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, timeout=30, check=False
        )
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    return None


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """Linux: the kernel sends SIGTERM to this process when its parent dies (strictly: when
    the thread that started it ends; servers are started from the main thread)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


_ERROR_LINE = re.compile(r"error|exception|fatal|failed|traceback", re.IGNORECASE)


def log_header(arm: str, command: list[str]) -> str:
    """The line a server's log gets before each start: when, which arm, the command line
    (`log_tail` skips it by its `=== flatscore` mark)."""
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    return f"=== flatscore {now} {arm}: {shlex.join(command)}\n"


def log_tail(log: Path, lines: int = TAIL_LINES) -> str:
    """The last non-empty lines of a log, joined into one line; the last line that reads
    like an error goes first when it is not among them (a server's teardown messages can
    follow the reason it stopped)."""
    if not log.exists():
        return "(no log)"
    text = log.read_bytes()[-20_000:].decode("utf-8", errors="replace")
    kept = [" ".join(ln.split()) for ln in text.splitlines() if ln.strip()]
    kept = [ln for ln in kept if not ln.startswith("=== flatscore")]
    if not kept:
        return "(empty log)"
    tail = kept[-lines:]
    errors = [ln for ln in kept if _ERROR_LINE.search(ln)]
    if errors and errors[-1] not in tail:
        tail = [errors[-1], "...", *tail[-(lines - 1) :]]
    return " | ".join(ln[:300] for ln in tail)


@dataclass
class ServerProcess:
    """One server process: `arm` names it in every message, `log` collects its output
    (appended to, one header line per start)."""

    arm: str
    spec: ServerSpec
    served_name: str
    log: Path
    port: int = 0
    command: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None
    version: str | None = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    def start(self) -> None:
        if self.spec.port is not None and not port_free(self.spec.port):
            raise ServerStartError(
                f"server for arm {self.arm} did not start: port {self.spec.port} on {HOST} "
                "is already in use (leave `port` out: flatscore picks a free one)"
            )
        self.port = self.spec.port or free_port()
        self.command = command_line(self._weights_resolved(), self.port, self.served_name)
        env = {**os.environ, "OMP_NUM_THREADS": str(self.spec.threads)}
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            out.write(log_header(self.arm, self.command).encode())
            out.flush()
            try:
                self.proc = subprocess.Popen(
                    self.command,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    start_new_session=True,
                    preexec_fn=_die_with_parent if sys.platform == "linux" else None,
                )
            except OSError as exc:
                raise ServerStartError(
                    f"server for arm {self.arm} did not start: {exc.strerror or exc} "
                    f"({self.command[0]})"
                ) from None

    def _weights_resolved(self) -> ServerSpec:
        """llama-cpp: a named model (`embedded-base`) or a quantization made from the file,
        as the GGUF file it is; any other path goes to the server as it is (the server
        reports a missing one in its log)."""
        spec = self.spec
        if spec.kind != "llama-cpp" or (spec.quant is None and spec.model not in NAMED_MODELS):
            return spec
        from flatscore.models.gguf_files import resolve_arm

        try:
            arm = resolve_arm(str(spec.model), spec.quant or "ref", threads=spec.threads)
        except InputError as exc:
            raise ServerStartError(
                f"server for arm {self.arm} did not start: {exc.one_line()}"
            ) from None
        return spec.model_copy(update={"model": str(arm.file), "quant": None})

    def wait_ready(self) -> None:
        """Until the server lists its models; a server that exits or does not answer within
        its `start_timeout_s` is stopped and raised as one `ServerStartError`."""
        assert self.proc is not None
        timeout_s = self.spec.start_timeout_s
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                self.stop()  # what it left in its process group
                raise self._failed(f"exited with code {code}")
            with contextlib.suppress(httpx.HTTPError):
                answered = httpx.get(f"{self.url}/models", timeout=2).status_code == 200
                if answered and self.proc.poll() is None:  # ours, not another on the port
                    self.version = server_version(self.spec)
                    return
            if time.monotonic() > deadline:
                self.stop()
                raise self._failed(f"did not answer within {timeout_s:.0f} s")
            time.sleep(0.5)

    def _failed(self, what: str) -> ServerStartError:
        return ServerStartError(
            f"server for arm {self.arm} {what} (log {self.log}): {log_tail(self.log)}"
        )

    def served_by(self) -> ServedBy:
        return ServedBy(
            kind=self.spec.kind or "",
            version=self.version,
            command=tuple(self.command),
            url=self.url,
            log=str(self.log),
            pid=self.proc.pid if self.proc is not None else None,
        )

    def stop(self) -> None:
        """SIGTERM to its process group (a server's workers too), SIGKILL if it lingers."""
        stop_all([self])


def stop_all(servers: list[ServerProcess], wait_s: float = STOP_WAIT_S) -> None:
    """Stop every server at once: SIGTERM to each process group, one shared wait, then
    SIGKILL to every group. The SIGKILL runs whatever interrupts the wait (a second
    Ctrl-C, the time limit's second SIGINT), so no server outlives the run."""
    procs = [p for p in (s.proc for s in servers) if p is not None]
    for server in servers:
        server.proc = None
    try:
        for proc in procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + wait_s
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # what lingers, and what it left in its group
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)  # reaped: no zombie left behind


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", name)


@dataclass
class ServerPool:
    """Starts each distinct server once (one at a time: each is up before the next starts)
    and stops every one it started on exit. Logs go to `log_dir/<arm>.log`. `on_start(arm,
    spec)`: a server is about to start (the run says so: `report.server_text`)."""

    log_dir: Path
    on_start: Callable[[str, ServerSpec], None] | None = None
    servers: dict[tuple[ServerSpec, str], ServerProcess] = field(default_factory=dict)

    def start(self, arm: str, spec: ServerSpec, served_name: str) -> ServedBy:
        """The server for (`spec`, `served_name`), started and ready (once)."""
        key = (spec, served_name)
        server = self.servers.get(key)
        if server is None:
            log = self.log_dir / f"{_safe(arm)}.log"
            server = ServerProcess(arm=arm, spec=spec, served_name=served_name, log=log)
            self.servers[key] = server
            if self.on_start is not None:
                self.on_start(arm, spec)
            server.start()
            server.wait_ready()
        return server.served_by()

    def close(self) -> None:
        stop_all(list(self.servers.values()))

    def __enter__(self) -> ServerPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
