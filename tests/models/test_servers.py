"""The server launcher's life cycle with real processes on loopback: a server is ready once
it lists its models and stopped with its whole process group; one that exits, never answers
or cannot be run is one `ServerStartError` naming the arm and its log's last lines; logs are
appended to. The stand-in server is a small script run as the spec's interpreter (it answers
`/v1/models` and starts a worker process of its own); llama.cpp's real server:
tests/run/test_server_arms.py."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import httpx
import pytest

from flatscore.models.servers import ServerPool, ServerProcess, ServerStartError, log_tail
from flatscore.study.server import ServerSpec
from server_processes import gone

STAND_IN = """#!{python}
import http.server, json, subprocess, sys, time
args = sys.argv[1:]
mode = {mode!r}
if args[0] == "-c":  # asked for the server package's version
    print("9.9.9")
    sys.exit(0)
if mode == "crash":
    print("loading the model ...", flush=True)
    print("ValueError: Model path does not exist: nowhere.gguf", flush=True)
    sys.exit(3)
if mode == "silent":
    time.sleep(600)
port = int(args[args.index("--port") + 1])
worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print("worker", worker.pid, flush=True)

class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({{"data": [{{"id": "m"}}]}}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass

http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""


def stand_in(tmp_path: Path, mode: str) -> str:
    script = tmp_path / f"python-{mode}"
    script.write_text(STAND_IN.format(python=sys.executable, mode=mode))
    script.chmod(0o755)
    return str(script)


def spec(python: str, **kw: object) -> ServerSpec:
    return ServerSpec.model_validate(
        {"kind": "llama-cpp", "model": "/w/a.gguf", "python": python, **kw}
    )


def test_a_ready_server_is_stopped_with_its_workers_and_its_log_kept(tmp_path: Path) -> None:
    python = stand_in(tmp_path, "serve")
    started: list[tuple[str, ServerSpec]] = []
    pool = ServerPool(tmp_path / "logs", on_start=lambda arm, s: started.append((arm, s)))
    with pytest.raises(RuntimeError, match="boom"), pool:
        served = pool.start("m/ref", spec(python), "m")
        assert pool.start("m/other", spec(python), "m") == served  # once per server
        assert started == [("m/ref", spec(python))]  # said once, by its first arm
        assert httpx.get(f"{served.url}/models", timeout=5).json()["data"][0]["id"] == "m"
        assert served.command[:3] == (python, "-m", "llama_cpp.server")
        assert served.kind == "llama-cpp" and served.pid is not None
        assert served.version == "9.9.9"  # as the server's own interpreter reports it
        log = Path(served.log)
        assert log == tmp_path / "logs" / "m_ref.log"
        deadline = time.monotonic() + 10
        while "worker" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        worker = int(log.read_text().split("worker ")[1].split()[0])
        raise RuntimeError("boom")
    assert served.pid is not None and gone(served.pid)
    assert gone(worker)  # the server's own child too
    # a second run appends to the same log: one header line per start
    with ServerPool(tmp_path / "logs") as pool:
        pool.start("m/ref", spec(python), "m")
    headers = [ln for ln in log.read_text().splitlines() if ln.startswith("=== flatscore")]
    assert len(headers) == 2 and "m/ref: " in headers[0]


def test_a_server_that_exits_is_one_line_with_its_logs_last_lines(tmp_path: Path) -> None:
    server = ServerProcess("m/q4", spec(stand_in(tmp_path, "crash")), "m", tmp_path / "q4.log")
    server.start()
    with pytest.raises(ServerStartError) as err:
        server.wait_ready()
    line = err.value.one_line()
    assert line.startswith("server for arm m/q4 exited with code 3 (log ")
    assert line.endswith(
        "loading the model ... | ValueError: Model path does not exist: nowhere.gguf"
    )
    assert "\n" not in line


def test_a_server_that_never_answers_is_stopped_at_its_timeout(tmp_path: Path) -> None:
    server = ServerProcess(
        "m/q4", spec(stand_in(tmp_path, "silent"), start_timeout_s=1), "m", tmp_path / "q4.log"
    )
    server.start()
    assert server.proc is not None
    pid = server.proc.pid
    with pytest.raises(ServerStartError, match=r"server for arm m/q4 did not answer within 1 s"):
        server.wait_ready()
    assert gone(pid)


def test_a_server_that_cannot_be_run_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ServerStartError, match=r"server for arm m/q4 did not start: .*nowhere"):
        ServerPool(tmp_path).start("m/q4", spec(str(tmp_path / "nowhere" / "python")), "m")


def test_a_missing_named_quantization_source_is_one_line(tmp_path: Path) -> None:
    """`quant` makes the arm's file with llama.cpp's quantizer from `model`: a missing
    source is refused before anything starts, naming the arm and the file."""
    bad = spec(sys.executable, model=str(tmp_path / "none.gguf"), quant="Q8_0")
    with pytest.raises(ServerStartError, match=r"arm m/q8 did not start: .*none.gguf"):
        ServerPool(tmp_path).start("m/q8", bad, "m")


def test_a_port_in_use_is_refused_before_the_server_starts(tmp_path: Path) -> None:
    """An arm's own `port` that something already listens on: another server would answer
    in the arm's place, so nothing starts."""
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        server = ServerProcess(
            "m/q4", spec(stand_in(tmp_path, "serve"), port=port), "m", tmp_path / "q4.log"
        )
        with pytest.raises(ServerStartError) as err:
            server.start()
    assert err.value.one_line() == (
        f"server for arm m/q4 did not start: port {port} on 127.0.0.1 is already in use "
        "(leave `port` out: flatscore picks a free one)"
    )
    assert server.proc is None and not server.log.exists()


def test_the_reason_comes_first_when_teardown_messages_follow_it(tmp_path: Path) -> None:
    """uvicorn's bind error, then its shutdown lines and llama.cpp's teardown: the error
    leads the one line (as llama.cpp's server wrote it when its port was taken)."""
    log = tmp_path / "x.log"
    log.write_text(
        "=== flatscore 2026-01-01T00:00:00+00:00 m/a: python -m llama_cpp.server\n"
        "INFO:     Application startup complete.\n"
        "ERROR:    [Errno 98] error while attempting to bind on address "
        "('127.0.0.1', 5): address already in use\n"
        "INFO:     Waiting for application shutdown.\n"
        "INFO:     Application shutdown complete.\n"
        "~llama_context:        CPU compute buffer size is  99.3770 MiB\n"
    )
    assert log_tail(log) == (
        "ERROR: [Errno 98] error while attempting to bind on address ('127.0.0.1', 5): "
        "address already in use | ... | INFO: Application shutdown complete. | "
        "~llama_context: CPU compute buffer size is 99.3770 MiB"
    )
    log.write_text("a\nValueError: Model path does not exist: x.gguf\n")
    assert log_tail(log) == "a | ValueError: Model path does not exist: x.gguf"
