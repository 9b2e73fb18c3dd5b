"""`flatscore serve`'s HTTP layer under abuse: a real uvicorn server on loopback, in front of
a token-by-token backend that needs no model weights (the app, validation, guard and
cancellation are the things under test; generation is the local backend's, tested in
test_app.py)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn

from flatscore.episode import Message, TokenUsage
from flatscore.models.base import Backend, BackendError, ContextWindowExceeded, Generation, Sampling
from flatscore.models.cancel import check_cancelled
from flatscore.run.tau2.endpoints import free_port
from flatscore.serve.app import create_app
from flatscore.serve.guard import MAX_BODY_BYTES, GuardConfig

USER = [{"role": "user", "content": "hi"}]
OK = {"model": "m", "messages": USER}
TOOL = {
    "type": "function",
    "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}},
}


class Counting(Backend):
    """Emits one token per `delay_s` (checking for cancellation between tokens, as the local
    backend does) and records the sampling it was asked for and what it finished."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.samplings: list[Sampling] = []
        self.finished = 0
        self.cancelled = 0
        self.lock = threading.Lock()

    def generate(
        self, messages: list[Message], tools: list[dict[str, Any]], sampling: Sampling
    ) -> Generation:
        with self.lock:  # one generation at a time, like the local backend
            self.samplings.append(sampling)
            tokens = []
            try:
                for i in range(sampling.max_tokens):
                    check_cancelled()
                    time.sleep(self.delay_s)
                    tokens.append(f"t{i}")
            except BaseException:
                self.cancelled += 1
                raise
            self.finished += 1
        text = " ".join(tokens)
        usage = TokenUsage(prompt_tokens=len(messages), completion_tokens=len(tokens))
        return Generation(
            message=Message(role="assistant", content=text),
            raw_text=text,
            usage=usage,
            finish_reason="length",
        )


class Server:
    def __init__(self, backend: Backend, guard: GuardConfig | None = None) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            create_app(backend, "m", guard), host="127.0.0.1", port=self.port, log_level="critical"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline:
                raise TimeoutError("uvicorn did not start")
            time.sleep(0.02)

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def backend() -> Counting:
    return Counting()


@pytest.fixture(scope="module")
def server(backend: Counting) -> Iterator[Server]:
    s = Server(backend)
    yield s
    s.close()


def post(server: Server, body: Any, **kw: Any) -> httpx.Response:
    kw.setdefault("timeout", 30)
    if isinstance(body, bytes):
        kw.setdefault("headers", {"content-type": "application/json"})
        return httpx.post(server.base + "/v1/chat/completions", content=body, **kw)
    return httpx.post(server.base + "/v1/chat/completions", json=body, **kw)


def assert_openai_error(r: httpx.Response, status: int, param: str | None = None) -> None:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    if param is not None:
        assert err["param"] == param


def test_a_valid_request_is_answered(server: Server) -> None:
    r = post(server, {**OK, "max_tokens": 3})
    assert r.status_code == 200
    assert r.json()["choices"][0]["message"]["content"] == "t0 t1 t2"


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"tools": "abc"}, "tools"),
        ({"tools": [1]}, "tools[0]"),
        ({"tools": [{}]}, "tools[0].type"),
        ({"seed": 2**64}, "seed"),
        ({"max_tokens": "8"}, "max_tokens"),
        ({"max_tokens": 8.7}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": -1}, "max_tokens"),
        ({"top_p": 1.5}, "top_p"),
        ({"top_p": -0.1}, "top_p"),
        ({"temperature": 3}, "temperature"),
        ({"temperature": "hot"}, "temperature"),
        ({"top_logprobs": 21, "logprobs": True}, "top_logprobs"),
        ({"messages": "hi"}, "messages"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "user"}]}, "messages[0].content"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0]"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
        ({"stream": True}, "stream"),
        ({"n": 2}, "n"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"unknown_field": 1}, "unknown_field"),
        (
            {"tool_choice": {"type": "function", "function": {"name": "nope"}}, "tools": [TOOL]},
            None,
        ),
        ({"tool_choice": "required"}, None),
        ({"tool_choice": "sometimes"}, "tool_choice"),
    ],
)
def test_every_bad_field_is_a_400_in_openai_shape(
    server: Server, extra: dict[str, Any], param: str | None
) -> None:
    assert_openai_error(post(server, {**OK, **extra}), 400, param)


@pytest.mark.parametrize(
    "body",
    [b"[1]", b"[{}]", b"{oops", b"", b'"text"', b"[" * 100_000 + b"]" * 100_000, b"\xc0\xaf"],
)
def test_malformed_bodies_are_400(server: Server, body: bytes) -> None:
    assert_openai_error(post(server, body), 400)


def test_model_field_is_required(server: Server) -> None:
    assert_openai_error(post(server, {"messages": USER}), 400, "model")


def test_max_tokens_and_top_p_are_honoured_not_replaced(server: Server, backend: Counting) -> None:
    r = post(server, {**OK, "max_tokens": 2, "top_p": 0, "temperature": 0.7})
    assert r.status_code == 200
    sampling = backend.samplings[-1]
    assert sampling.max_tokens == 2  # not 512
    assert sampling.greedy  # top_p 0 keeps only the most likely token
    r = post(server, {**OK, "max_completion_tokens": 1, "top_p": 0.3, "temperature": 0.7})
    assert r.status_code == 200
    assert backend.samplings[-1].max_tokens == 1 and backend.samplings[-1].top_p == 0.3


def test_unknown_paths_and_methods_are_json(server: Server) -> None:
    r = httpx.get(server.base + "/nope")
    assert_openai_error(r, 404)
    r = httpx.get(server.base + "/v1/chat/completions")
    assert_openai_error(r, 405)
    r = httpx.delete(server.base + "/v1/models")
    assert_openai_error(r, 405)


def test_body_size_limit(server: Server) -> None:
    big = json.dumps({**OK, "user": "x" * (MAX_BODY_BYTES + 10)}).encode()
    t0 = time.perf_counter()
    assert_openai_error(post(server, big), 413)
    assert time.perf_counter() - t0 < 5

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"model": "m", "user": "'
        for _ in range(MAX_BODY_BYTES // 65536 + 2):
            yield b"x" * 65536
        yield b'"}'

    r = httpx.post(
        server.base + "/v1/chat/completions",
        content=chunks(),
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert_openai_error(r, 413)


@pytest.mark.parametrize(
    "headers",
    [
        {"host": "evil.example"},  # DNS rebinding: a hostile name resolving to 127.0.0.1
        {"host": "evil.example:8000"},
        {"origin": "https://evil.example"},  # a web page's cross-site request
        {"origin": "null"},
        {"origin": "http://127.0.0.1.evil.example"},
    ],
)
def test_foreign_host_or_origin_is_403(server: Server, headers: dict[str, str]) -> None:
    assert_openai_error(post(server, OK, headers=headers), 403)
    assert_openai_error(httpx.get(server.base + "/v1/models", headers=headers), 403)


def raw_status(server: Server, request: bytes) -> tuple[int, bytes]:
    """Send `request` as raw bytes (httpx always adds a Host header); the status and body."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as conn:
        conn.sendall(request)
        reply = b""
        while chunk := conn.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


NO_HOST = [
    b"GET /v1/models HTTP/1.0\r\n\r\n",
    b"POST /v1/chat/completions HTTP/1.0\r\ncontent-type: application/json\r\n"
    + f"content-length: {len(json.dumps(OK))}\r\n\r\n{json.dumps(OK)}".encode(),
]


@pytest.mark.parametrize("request_bytes", NO_HOST, ids=["GET", "POST"])
def test_a_request_without_host_header_is_403(server: Server, request_bytes: bytes) -> None:
    """HTTP/1.0 needs no Host header; the guard must refuse, not skip the check."""
    status, body = raw_status(server, request_bytes)
    assert status == 403 and json.loads(body)["error"]["code"] == "bad_host"
    with_host = request_bytes.replace(b"\r\n", f"\r\nhost: 127.0.0.1:{server.port}\r\n".encode(), 1)
    assert raw_status(server, with_host)[0] == 200  # the same request, named, is served


def test_loopback_origin_is_allowed(server: Server) -> None:
    r = post(server, {**OK, "max_tokens": 1}, headers={"origin": f"http://localhost:{server.port}"})
    assert r.status_code == 200
    r = post(server, {**OK, "max_tokens": 1}, headers={"host": f"localhost:{server.port}"})
    assert r.status_code == 200


@pytest.mark.parametrize("ctype", ["text/plain", "application/x-www-form-urlencoded", None])
def test_non_json_content_type_is_415(server: Server, ctype: str | None) -> None:
    headers = {"content-type": ctype} if ctype else {}
    r = httpx.post(
        server.base + "/v1/chat/completions",
        content=json.dumps(OK).encode(),
        headers=headers,
        timeout=30,
    )
    assert_openai_error(r, 415)


def test_api_key_is_required_when_configured() -> None:
    s = Server(Counting(), GuardConfig(api_key="sk-test-0123456789"))
    try:
        assert_openai_error(post(s, OK), 401)
        bad = {"authorization": "Bearer sk-wrong"}
        assert_openai_error(post(s, OK, headers=bad), 401)
        assert_openai_error(httpx.get(s.base + "/v1/models"), 401)
        for scheme in ("Basic", "Token", "Digest", ""):
            wrong = {"authorization": f"{scheme} sk-test-0123456789".strip()}
            assert_openai_error(post(s, OK, headers=wrong), 401)  # only Bearer carries it
            assert_openai_error(httpx.get(s.base + "/v1/models", headers=wrong), 401)
        assert_openai_error(post(s, OK, headers={"x-api-key": "sk-test-0123456789"}), 401)
        good = {"authorization": "Bearer sk-test-0123456789"}
        assert post(s, {**OK, "max_tokens": 1}, headers=good).status_code == 200
        assert httpx.get(s.base + "/v1/models", headers=good).status_code == 200
    finally:
        s.close()


def test_a_disconnected_client_cancels_its_generation() -> None:
    slow = Counting(delay_s=0.05)  # 400 tokens = 20 s if nobody stops it
    s = Server(slow)
    try:
        with pytest.raises(httpx.ReadTimeout):
            post(s, {**OK, "max_tokens": 400}, timeout=0.5)  # the client gives up
        deadline = time.monotonic() + 5
        while slow.cancelled == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert slow.cancelled == 1 and slow.finished == 0
        t0 = time.perf_counter()
        r = post(s, {**OK, "max_tokens": 4})  # the next request is not stuck behind it
        assert r.status_code == 200 and time.perf_counter() - t0 < 2
    finally:
        s.close()


class Failing(Counting):
    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    def generate(
        self, messages: list[Message], tools: list[dict[str, Any]], sampling: Sampling
    ) -> Generation:
        raise self.error


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (ContextWindowExceeded("prompt too long"), 400),
        (BackendError("weights fell off", kind="server_error"), 500),
        (RuntimeError("a bug"), 500),
    ],
)
def test_backend_failures_are_json(error: Exception, status: int) -> None:
    s = Server(Failing(error))
    try:
        r = post(s, OK)
        assert_openai_error(r, status)
        if isinstance(error, ContextWindowExceeded):
            assert "maximum context length" in r.json()["error"]["message"]
        if isinstance(error, RuntimeError):
            assert "a bug" not in r.text  # no internals leak to the client
    finally:
        s.close()


def test_bound_beyond_loopback_any_host_but_never_a_foreign_origin() -> None:
    guard = GuardConfig(bind_host="0.0.0.0", api_key="sk-test-0123456789")
    assert guard.host_allowed("my-laptop.lan") and not GuardConfig().host_allowed("evil.example")
    s = Server(Counting(), guard)
    try:
        key = {"authorization": "Bearer sk-test-0123456789"}
        r = post(s, {**OK, "max_tokens": 1}, headers={**key, "host": "my-laptop.lan"})
        assert r.status_code == 200
        assert_openai_error(post(s, OK, headers={**key, "origin": "https://evil.example"}), 403)
        no_host = b"GET /v1/models HTTP/1.0\r\nauthorization: Bearer sk-test-0123456789\r\n\r\n"
        assert raw_status(s, no_host)[0] == 403  # any name, but a name
    finally:
        s.close()
