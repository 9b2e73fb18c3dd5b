"""The openai backend against a real fault-injecting HTTP server on loopback."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from fault_server import FaultServer, Reply, ok_body

from flatscore.episode import Message
from flatscore.models.base import BackendError, ContextWindowExceeded, Sampling
from flatscore.models.openai import OpenAIBackend, OpenAIConfig
from sample_chat import CONVERSATION

MSGS = [Message(role="user", content="hi")]
TOOLS = [{"type": "function", "function": {"name": "get_order", "parameters": {}}}]


def backend(server: FaultServer, **kw: object) -> OpenAIBackend:
    settings: dict[str, object] = {
        "base_url": server.url,
        "model": "m",
        "timeout_s": 2.0,
        "max_retries": 3,
        "backoff_s": 0.01,
        "max_backoff_s": 0.05,
        "api_key_env": "FS_TEST_KEY",
    }
    settings.update(kw)
    return OpenAIBackend(OpenAIConfig.model_validate(settings))


def test_retries_server_errors_then_succeeds(fault_server: FaultServer) -> None:
    fault_server.script = [Reply(500), Reply(503), Reply()]
    gen = backend(fault_server).generate(MSGS, [], Sampling())
    assert gen.message.content == "hello" and not gen.message.malformed
    assert len(fault_server.requests) == 3


def test_retries_rate_limit_honouring_retry_after(fault_server: FaultServer) -> None:
    fault_server.script = [Reply(429, headers={"Retry-After": "0"}), Reply()]
    assert backend(fault_server).generate(MSGS, [], Sampling()).message.content == "hello"
    assert len(fault_server.requests) == 2


def test_retries_timeouts(fault_server: FaultServer) -> None:
    fault_server.script = [Reply(delay_s=1.0), Reply()]
    gen = backend(fault_server, timeout_s=0.3).generate(MSGS, [], Sampling())
    assert gen.message.content == "hello"
    assert len(fault_server.requests) == 2


def test_persistent_timeout_raises_classified_error(fault_server: FaultServer) -> None:
    fault_server.script = [Reply(delay_s=0.6)]
    with pytest.raises(BackendError) as err:
        backend(fault_server, timeout_s=0.2, max_retries=1).generate(MSGS, [], Sampling())
    assert err.value.kind == "timeout" and err.value.retryable
    assert len(fault_server.requests) == 2


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_never_retries_other_client_errors(fault_server: FaultServer, status: int) -> None:
    fault_server.script = [Reply(status, {"error": {"message": "nope"}})]
    with pytest.raises(BackendError) as err:
        backend(fault_server).generate(MSGS, [], Sampling())
    assert err.value.kind == "client_error" and err.value.status == status
    assert not err.value.retryable
    assert len(fault_server.requests) == 1


def test_context_overflow_is_its_own_error(fault_server: FaultServer) -> None:
    body = {"error": {"message": "This model's maximum context length is 8192 tokens"}}
    fault_server.script = [Reply(400, body)]
    with pytest.raises(ContextWindowExceeded):
        backend(fault_server).generate(MSGS, [], Sampling())
    assert len(fault_server.requests) == 1


@pytest.mark.parametrize("body", ["{not json", '{"choices": []}', '{"choices": [{"x": 1}]}'])
def test_invalid_bodies_are_retried_then_reported(fault_server: FaultServer, body: str) -> None:
    fault_server.script = [Reply(200, body)]
    with pytest.raises(BackendError) as err:
        backend(fault_server, max_retries=2).generate(MSGS, [], Sampling())
    assert err.value.kind == "invalid_response"
    assert len(fault_server.requests) == 3


def test_invalid_body_then_good_one_recovers(fault_server: FaultServer) -> None:
    fault_server.script = [Reply(200, "<html>gateway</html>"), Reply()]
    assert backend(fault_server).generate(MSGS, [], Sampling()).message.content == "hello"


def test_connection_refused_is_a_connection_error() -> None:
    config = OpenAIConfig(
        base_url="http://127.0.0.1:9/v1", model="m", max_retries=1, backoff_s=0.01
    )
    with pytest.raises(BackendError) as err:
        OpenAIBackend(config).generate(MSGS, [], Sampling())
    assert err.value.kind == "connection"


def test_broken_argument_json_is_kept_raw(fault_server: FaultServer) -> None:
    calls = [
        {
            "id": "a",
            "type": "function",
            "function": {"name": "get_order", "arguments": '{"order_id": "#W1"'},
        },
        {
            "id": "b",
            "type": "function",
            "function": {"name": "get_order", "arguments": '{"order_id": "#W2"}'},
        },
    ]
    fault_server.script = [Reply(body=ok_body(None, calls))]
    gen = backend(fault_server).generate(MSGS, TOOLS, Sampling())
    first, second = gen.message.tool_calls
    assert first.arguments == '{"order_id": "#W1"' and not first.arguments_parsed
    assert second.arguments == {"order_id": "#W2"}
    assert first.requestor == "agent" and not gen.message.malformed


def test_empty_output_is_malformed_not_an_exception(fault_server: FaultServer) -> None:
    fault_server.script = [Reply(body=ok_body(None))]
    gen = backend(fault_server).generate(MSGS, [], Sampling())
    assert gen.message.malformed and gen.message.content == ""


def test_request_carries_tools_logprobs_and_sampling(fault_server: FaultServer) -> None:
    lp = {
        "content": [
            {"token": "hi", "logprob": -0.1, "top_logprobs": [{"token": "hi", "logprob": -0.1}]}
        ]
    }
    fault_server.script = [Reply(body=ok_body("hi", logprobs=lp))]
    sampling = Sampling(
        temperature=0.5,
        seed=3,
        stop=("\n",),
        logprobs=True,
        top_logprobs=2,
        tool_choice="required",
        max_tokens=7,
    )
    gen = backend(fault_server).generate(MSGS, TOOLS, sampling)
    sent = fault_server.requests[0]
    assert sent["tools"] == TOOLS and sent["tool_choice"] == "required"
    assert sent["logprobs"] is True and sent["top_logprobs"] == 2
    assert (sent["seed"], sent["stop"], sent["max_tokens"], sent["temperature"]) == (
        3,
        ["\n"],
        7,
        0.5,
    )
    assert gen.logprobs is not None and gen.logprobs[0].top[0].token == "hi"
    assert gen.usage.prompt_tokens == 5


def test_every_request_message_has_string_content(fault_server: FaultServer) -> None:
    """The assistant turn with tool calls goes back with `content: ""` (llama.cpp's server
    refuses null and breaks on an omitted content), every other message with a string too,
    and nothing beyond OpenAI's documented fields."""
    history = [
        *CONVERSATION,  # system, user, an assistant tool call (c0) and its result
        Message(role="assistant", content=None, malformed=True),
        Message(role="user", content=None),
    ]
    backend(fault_server).generate(history, TOOLS, Sampling())
    sent = fault_server.requests[0]["messages"]
    assert all(isinstance(m["content"], str) for m in sent)
    turn = sent[2]
    assert turn == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c0",
                "type": "function",
                "function": {"name": "get_order_details", "arguments": '{"order_id": "#W123"}'},
            }
        ],
    }
    assert sent[3] == {"role": "tool", "tool_call_id": "c0", "content": '{"status": "shipped"}'}
    allowed = {"role", "content", "tool_calls", "tool_call_id"}
    assert all(set(m) <= allowed for m in sent)


def test_cache_makes_reruns_free_and_exact_and_never_stores_the_key(
    fault_server: FaultServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-test-SECRET-123"
    monkeypatch.setenv("FS_TEST_KEY", secret)
    db = tmp_path / "cache.sqlite"
    first = backend(fault_server, cache_path=db).generate(MSGS, TOOLS, Sampling())
    assert fault_server.headers[0]["Authorization"] == f"Bearer {secret}"
    again = backend(fault_server, cache_path=db)  # a new process would do the same
    second = again.generate(MSGS, TOOLS, Sampling())
    again.close()
    assert len(fault_server.requests) == 1
    assert second.cached and not first.cached
    assert second.message == first.message and second.raw_text == first.raw_text
    # a different request is a miss
    backend(fault_server, cache_path=db).generate(MSGS, [], Sampling())
    assert len(fault_server.requests) == 2
    for path in tmp_path.iterdir():
        assert secret.encode() not in path.read_bytes()
    rows = sqlite3.connect(db).execute("SELECT request, response FROM responses").fetchall()
    assert rows and all(secret not in r[0] + r[1] for r in rows)


def test_unseeded_sampling_is_not_cached(fault_server: FaultServer, tmp_path: Path) -> None:
    b = backend(fault_server, cache_path=tmp_path / "c.sqlite")
    b.generate(MSGS, [], Sampling(temperature=0.7))
    b.generate(MSGS, [], Sampling(temperature=0.7))
    assert len(fault_server.requests) == 2
    b.generate(MSGS, [], Sampling(temperature=0.7, seed=1))
    b.generate(MSGS, [], Sampling(temperature=0.7, seed=1))
    assert len(fault_server.requests) == 3


def test_async_respects_concurrency_limit_and_retries(fault_server: FaultServer) -> None:
    fault_server.script = [Reply(500), *[Reply(delay_s=0.1)] * 10]
    b = backend(fault_server, endpoint_concurrency=2)

    async def run() -> list[str | None]:
        gens = await asyncio.gather(*[b.agenerate(MSGS, [], Sampling()) for _ in range(6)])
        return [g.message.content for g in gens]

    assert asyncio.run(run()) == ["hello"] * 6
    assert fault_server.max_in_flight <= 2
    assert len(fault_server.requests) == 7


def test_one_backend_serves_several_event_loops(fault_server: FaultServer) -> None:
    fault_server.script = [Reply(delay_s=0.05)]
    b = backend(fault_server, endpoint_concurrency=1)

    async def run() -> None:
        await asyncio.gather(*[b.agenerate(MSGS, [], Sampling()) for _ in range(3)])

    asyncio.run(run())
    asyncio.run(run())  # a second loop (e.g. a second CLI step) must not trip the limiter
    assert len(fault_server.requests) == 6 and fault_server.max_in_flight == 1


def test_one_pooled_connection_serves_every_request() -> None:
    """Sequential requests, sync and async, reuse the backend's pooled connections (one TCP
    connection per client against a keep-alive server), and close() releases them."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    ports: list[int] = []

    class KeepAlive(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            ports.append(self.client_address[1])
            data = json.dumps(ok_body()).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), KeepAlive)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        b = OpenAIBackend(OpenAIConfig(base_url=url, model="m", api_key_env=None))
        for _ in range(3):
            b.generate(MSGS, [], Sampling())

        async def three() -> None:
            for _ in range(3):
                await b.agenerate(MSGS, [], Sampling())

        loop = asyncio.new_event_loop()
        loop.run_until_complete(three())
        assert len(ports) == 6 and len(set(ports[:3])) == 1 and len(set(ports[3:])) == 1
        b.close()  # closes the sync client and, on its still-open loop, the async one
        assert b._sync_client is None and not b._per_loop
        loop.close()
    finally:
        httpd.shutdown()
        httpd.server_close()
